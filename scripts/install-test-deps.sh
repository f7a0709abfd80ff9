#!/usr/bin/env bash
# Installs what `make test` needs beyond Go modules. Idempotent and quiet when
# everything is present, so it is cheap to run before every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# versitygw: the real S3 server the object-store and end-to-end tests use.
./scripts/install-versitygw.sh

# psql: the sqlfront/pgwire tests drive the wire server with the real client.
if ! command -v psql >/dev/null 2>&1 || ! dpkg -s postgresql-client >/dev/null 2>&1; then
	if ! apt-cache show postgresql-client >/dev/null 2>&1; then apt-get update -qq; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-client >/dev/null
fi

# A JDK and pgjdbc: sqlfront's catalog test runs pgjdbc's DatabaseMetaData
# calls (sqlfront/testdata/pgcatalog/JdbcMetadata.java).
if ! command -v java >/dev/null 2>&1 || [ ! -f /usr/share/java/postgresql.jar ]; then
	if ! apt-cache show libpostgresql-jdbc-java >/dev/null 2>&1; then apt-get update -qq; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends default-jdk-headless libpostgresql-jdbc-java >/dev/null
fi

# Real PostgreSQL clients for the SQL end-to-end tests (cmd/mink/sql_e2e_test.go):
# psycopg2, SQLAlchemy and pandas for Debian's /usr/bin/python3, pgjdbc and a JDK to run it.
missing=()
dpkg -s python3-psycopg2 >/dev/null 2>&1 || missing+=(python3-psycopg2)
dpkg -s python3-sqlalchemy >/dev/null 2>&1 || missing+=(python3-sqlalchemy)
dpkg -s python3-pandas >/dev/null 2>&1 || missing+=(python3-pandas)
dpkg -s libpostgresql-jdbc-java >/dev/null 2>&1 || missing+=(libpostgresql-jdbc-java)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless) # java File.java needs the compiler
if [ ${#missing[@]} -gt 0 ]; then
	if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then apt-get update -qq; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Rust client (clients/rust): cargo, with rustfmt and clippy for
# `make lint`.
if command -v rustup >/dev/null 2>&1; then
	cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt >/dev/null
	cargo clippy --version >/dev/null 2>&1 || rustup component add clippy >/dev/null
elif ! command -v cargo >/dev/null 2>&1; then
	echo "install-test-deps: cargo is missing: install Rust (https://rustup.rs) for clients/rust" >&2
	exit 1
fi

# Real Kafka clients for the Kafka listener's end-to-end tests
# (cmd/mink/kafka_e2e_test.go): kcat (librdkafka) and kafka-python for
# Debian's /usr/bin/python3.
missing=()
dpkg -s kcat >/dev/null 2>&1 || missing+=(kcat)
dpkg -s python3-kafka >/dev/null 2>&1 || missing+=(python3-kafka)
if [ ${#missing[@]} -gt 0 ]; then
	if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then apt-get update -qq; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# confluent-kafka (PyPI; its wheel bundles librdkafka) in a virtualenv and
# kafkajs (npm) for cmd/mink/kafka_clients_e2e_test.go, both outside the
# clone so that every clone shares them. The test finds them at the same
# paths (os.UserCacheDir). The versions are pinned here and in
# test/clients/package.json.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mink"
confluent_kafka_version=2.16.1
pyarrow_version=26.0.1 # pyarrow.flight for cmd/mink/flight_auth_e2e_test.go
venv="$cache/venv"
if ! "$venv/bin/python" -c "import confluent_kafka, pyarrow, pyarrow.flight, sys; sys.exit(confluent_kafka.__version__ != '$confluent_kafka_version' or pyarrow.__version__ != '$pyarrow_version')" >/dev/null 2>&1; then
	if ! dpkg -s python3-venv >/dev/null 2>&1; then
		if ! apt-cache show python3-venv >/dev/null 2>&1; then apt-get update -qq; fi
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
	fi
	[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check "confluent-kafka==$confluent_kafka_version" "pyarrow==$pyarrow_version"
fi
# dbt-postgres for cmd/mink/dbt_e2e_test.go, in a virtualenv of its own
# (dbt pins many packages of its own).
dbt_core_version=1.9.1
dbt_postgres_version=1.9.0
dbt_venv="$cache/dbt-venv"
if ! "$dbt_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('dbt-core') != '$dbt_core_version' or m.version('dbt-postgres') != '$dbt_postgres_version')" >/dev/null 2>&1; then
	[ -x "$dbt_venv/bin/python" ] || /usr/bin/python3 -m venv "$dbt_venv"
	"$dbt_venv/bin/python" -m pip install -q --disable-pip-version-check "dbt-core==$dbt_core_version" "dbt-postgres==$dbt_postgres_version"
fi
# Django (the last release line that supports this Python, 3.11) and
# psycopg2 for cmd/mink/django_e2e_test.go, in a virtualenv of its own.
django_version=5.2.19
django_psycopg2_version=2.9.13
django_venv="$cache/django-venv"
if ! "$django_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('django') != '$django_version' or m.version('psycopg2-binary') != '$django_psycopg2_version')" >/dev/null 2>&1; then
	[ -x "$django_venv/bin/python" ] || /usr/bin/python3 -m venv "$django_venv"
	"$django_venv/bin/python" -m pip install -q --disable-pip-version-check "django==$django_version" "psycopg2-binary==$django_psycopg2_version"
fi
# PyIceberg for cmd/mink/iceberg_rest_e2e_test.go: it loads the lake's
# tables by name through mink's Iceberg REST catalog.
pyiceberg_version=0.12.0
iceberg_venv="$cache/iceberg-venv"
if ! "$iceberg_venv/bin/python" -c "import importlib.metadata as m, pyarrow, sys; sys.exit(m.version('pyiceberg') != '$pyiceberg_version' or pyarrow.__version__ != '$pyarrow_version')" >/dev/null 2>&1; then
	[ -x "$iceberg_venv/bin/python" ] || /usr/bin/python3 -m venv "$iceberg_venv"
	"$iceberg_venv/bin/python" -m pip install -q --disable-pip-version-check "pyiceberg[pyarrow]==$pyiceberg_version" "pyarrow==$pyarrow_version"
fi
# Spark (pyspark, PyPI) in local mode with Iceberg's Spark runtime (Maven
# Central) for the same test: Spark reads the lake through the catalog.
pyspark_version=3.5.7
iceberg_spark_jar="$cache/jars/iceberg-spark-runtime-3.5_2.12-1.10.1.jar"
iceberg_spark_sha1=6e4f43ae82d2291fa38c7a8fc1a46fbf95e8190f
spark_venv="$cache/spark-venv"
if ! "$spark_venv/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$pyspark_version')" >/dev/null 2>&1; then
	[ -x "$spark_venv/bin/python" ] || /usr/bin/python3 -m venv "$spark_venv"
	"$spark_venv/bin/python" -m pip install -q --disable-pip-version-check "pyspark==$pyspark_version"
fi
if ! echo "$iceberg_spark_sha1  $iceberg_spark_jar" | sha1sum -c --status 2>/dev/null; then
	mkdir -p "$(dirname "$iceberg_spark_jar")"
	curl -sSfL -o "$iceberg_spark_jar.part" "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-spark-runtime-3.5_2.12/1.10.1/$(basename "$iceberg_spark_jar")"
	echo "$iceberg_spark_sha1  $iceberg_spark_jar.part" | sha1sum -c --status
	mv "$iceberg_spark_jar.part" "$iceberg_spark_jar"
fi
# The ADBC Flight SQL driver for cmd/mink/flightsql_adbc_e2e_test.go
# (test/clients/flightsql_adbc.py), in a virtualenv of its own.
adbc_version=1.13.0
adbc_pyarrow_version=26.0.1
adbc_venv="$cache/adbc-venv"
if ! "$adbc_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('adbc-driver-flightsql') != '$adbc_version' or m.version('adbc-driver-manager') != '$adbc_version' or m.version('pyarrow') != '$adbc_pyarrow_version')" >/dev/null 2>&1; then
	[ -x "$adbc_venv/bin/python" ] || /usr/bin/python3 -m venv "$adbc_venv"
	"$adbc_venv/bin/python" -m pip install -q --disable-pip-version-check "adbc-driver-flightsql==$adbc_version" "adbc-driver-manager==$adbc_version" "pyarrow==$adbc_pyarrow_version"
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "install-test-deps: node and npm are missing: install Node.js 20 for test/clients/kafka_kafkajs.js" >&2
	exit 1
fi
node_dir="$cache/node"
if ! cmp -s test/clients/package.json "$node_dir/package.json" || [ ! -f "$node_dir/node_modules/kafkajs/package.json" ]; then
	mkdir -p "$node_dir"
	cp test/clients/package.json "$node_dir/package.json"
	(cd "$node_dir" && npm install --silent --no-audit --no-fund --no-package-lock >/dev/null)
fi
