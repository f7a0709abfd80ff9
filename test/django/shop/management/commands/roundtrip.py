"""manage.py roundtrip: an ORM round trip over both apps' tables, printing
one "name: value" line per result for cmd/mink's TestDjangoMigrations to
compare (the same lines PostgreSQL 15 gives for the same project)."""
import datetime
from decimal import Decimal

from django.core.management.base import BaseCommand
from django.db import transaction
from django.db.models import Avg, Count, Exists, F, Max, OuterRef, Sum

from blog.models import Post
from shop.models import Product


def at(day, hour=12):
    return datetime.datetime(2024, 5, day, hour, 0, tzinfo=datetime.timezone.utc)


class Command(BaseCommand):
    help = "Create, filter, update, join, aggregate and delete rows through the ORM."

    def out(self, name, value):
        self.stdout.write(f"{name}: {value}")

    def handle(self, *args, **options):
        with transaction.atomic():
            lamp = Product.objects.create(name="lamp", price=Decimal("19.99"), stock=3, created=at(1),
                                          attributes={"colour": "red", "watts": 40}, sku="L-1")
            desk = Product.objects.create(name="desk", price=Decimal("120.00"), stock=1, created=at(2),
                                          description="oak", attributes={"legs": 4})
            Product.objects.create(name="chair", price=Decimal("45.50"), created=at(3), active=False)
        Post.objects.create(title="Lamps", body="about lamps", product=lamp, written=at(4), likes=2)
        Post.objects.create(title="More lamps", body="again", product=lamp, written=at(5), published=True)
        Post.objects.create(title="Desks", body="about desks", product=desk, written=at(6), likes=7)

        self.out("active", list(Product.objects.filter(active=True).order_by("name").values_list("name", flat=True)))
        self.out("cheap", list(Product.objects.filter(price__lt=50).order_by("price").values_list("name", "price")))
        self.out("json", Product.objects.get(name="lamp").attributes)
        self.out("json_filter", list(Product.objects.filter(attributes__legs=4).values_list("name", flat=True)))

        # Updates: a queryset update with F(), and a model save.
        self.out("restocked", Product.objects.filter(stock__lt=2).update(stock=F("stock") + 10))
        desk.refresh_from_db()
        desk.description = "solid oak"
        desk.save()
        self.out("desk", (Product.objects.get(pk=desk.pk).description, Product.objects.get(pk=desk.pk).stock))

        # A join across the foreign key, both ways.
        self.out("lamp_posts", list(Post.objects.filter(product__name="lamp").order_by("written").values_list("title", flat=True)))
        self.out("select_related", [(p.title, p.product.name) for p in Post.objects.select_related("product").order_by("title")])

        # Aggregates.
        totals = Product.objects.aggregate(stock=Sum("stock"), avg_price=Avg("price"), newest=Max("created"))
        self.out("aggregate", (totals["stock"], round(totals["avg_price"], 2), totals["newest"].isoformat()))
        self.out("posts_per_product", list(Product.objects.annotate(n=Count("posts")).order_by("name").values_list("name", "n")))
        self.out("likes", list(Post.objects.values("product__name").annotate(likes=Sum("likes")).order_by("product__name").values_list("product__name", "likes")))

        # More of the ORM: bulk_create (INSERT … SELECT * FROM unnest(…)),
        # get_or_create, JSON key lookups, subqueries, prefetching, a
        # rolled-back atomic block, and a server-side cursor.
        made = Product.objects.bulk_create([Product(name=f"bulk{i}", price=Decimal(i), created=at(7 + i),
                                                    attributes={"batch": i}) for i in range(3)])
        self.out("bulk_create", (len(made), [p.pk is not None for p in made]))
        self.out("get_or_create", [Product.objects.get_or_create(name="stool", defaults={"price": 9, "created": at(9)})[1]
                                   for _ in range(2)])
        self.out("has_key", list(Product.objects.filter(attributes__has_key="batch").order_by("name").values_list("name", flat=True)))
        self.out("has_any_keys", Product.objects.filter(attributes__has_any_keys=["legs", "colour"]).count())
        self.out("with_posts", list(Product.objects.filter(Exists(Post.objects.filter(product=OuterRef("pk")))).order_by("name").values_list("name", flat=True)))
        self.out("prefetch", [(p.name, len(p.posts.all())) for p in Product.objects.prefetch_related("posts").filter(name__in=["desk", "lamp"]).order_by("name")])
        try:
            with transaction.atomic():
                Product.objects.create(name="ghost", price=1, created=at(10))
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        self.out("rolled_back", Product.objects.filter(name="ghost").exists())
        # iterator() reads through a server-side cursor, two rows a FETCH.
        self.out("iterator", [p.name for p in Product.objects.order_by("name").iterator(chunk_size=2)])

        # Deletes: one row, then a product with its posts (Django cascades).
        self.out("deleted_post", Post.objects.filter(title="More lamps").delete())
        self.out("deleted_product", Product.objects.filter(name="lamp").delete())
        self.out("left", (list(Product.objects.order_by("name").values_list("name", flat=True)),
                          list(Post.objects.values_list("title", flat=True))))
