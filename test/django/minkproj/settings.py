"""Settings of the Django project that cmd/mink's TestDjangoMigrations runs
against a mink node: the database is PostgreSQL's backend, pointed at the
node by MINK_DJANGO_PORT (and the other MINK_DJANGO_* variables)."""
import os

SECRET_KEY = "mink-test-only"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "shop",
    "blog",
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("MINK_DJANGO_HOST", "127.0.0.1"),
        "PORT": os.environ["MINK_DJANGO_PORT"],
        "USER": os.environ.get("MINK_DJANGO_USER", "mink"),
        "PASSWORD": os.environ.get("MINK_DJANGO_PASSWORD", ""),
        "NAME": os.environ.get("MINK_DJANGO_DB", "mink"),
    }
}
