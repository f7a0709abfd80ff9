package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// djangoPeerLines are what test/django's `manage.py roundtrip` prints on
// PostgreSQL 15 (Django 5.2.19, psycopg2-binary 2.9.13) after `migrate
// shop`, `migrate blog` and `migrate`. The project ran alike on PostgreSQL and on mink
// when this was written; a change of the project needs a new PostgreSQL run
// (test/django/README.md).
var djangoPeerLines = []string{
	"active: ['desk', 'lamp']",
	"cheap: [('lamp', Decimal('19.99')), ('chair', Decimal('45.50'))]",
	"json: {'watts': 40, 'colour': 'red'}",
	"json_filter: ['desk']",
	"restocked: 2",
	"desk: ('solid oak', 11)",
	"lamp_posts: ['Lamps', 'More lamps']",
	"select_related: [('Desks', 'desk'), ('Lamps', 'lamp'), ('More lamps', 'lamp')]",
	"aggregate: (24, Decimal('61.83'), '2024-05-03T12:00:00+00:00')",
	"posts_per_product: [('chair', 0), ('desk', 1), ('lamp', 2)]",
	"likes: [('desk', 7), ('lamp', 2)]",
	"bulk_create: (3, [True, True, True])",
	"get_or_create: [True, False]",
	"has_key: ['bulk0', 'bulk1', 'bulk2']",
	"has_any_keys: 2",
	"with_posts: ['desk', 'lamp']",
	"prefetch: [('desk', 1), ('lamp', 2)]",
	"rolled_back: False",
	"iterator: ['bulk0', 'bulk1', 'bulk2', 'chair', 'desk', 'lamp', 'stool']",
	"deleted_post: (1, {'blog.Post': 1})",
	"deleted_product: (2, {'blog.Post': 1, 'shop.Product': 1})",
	"left: (['bulk0', 'bulk1', 'bulk2', 'chair', 'desk', 'stool'], ['Desks'])",
}

// Django runs test/django's migrations of two apps unmodified against a
// node (shop's table, then blog's with a foreign key to it, an index and
// added columns), then those of its own contenttypes and auth apps (a
// dropped column, altered fields), and its ORM round trip (create, bulk_create, filter,
// JSON lookups, update, a join across the foreign key, aggregates,
// subqueries, prefetching, a rolled-back atomic block, a server-side
// cursor, cascading delete)
// prints what it prints on PostgreSQL; migrating again applies nothing.
func TestDjangoMigrations(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on).
	t.Parallel()
	python := filepath.Join(kafkaClientCache(t), "django-venv", "bin", "python")
	n, project, port := startToolProject(t, "Django", "../../test/django", python, "-c", "import django, psycopg2")
	manage := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(python, append([]string{"manage.py"}, args...)...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "MINK_DJANGO_PORT="+port, "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("manage.py %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, step := range []struct {
		app        string
		migrations []string
	}{
		{"shop", []string{"shop.0001_initial", "shop.0002_product_sku", "shop.0003_alter_product_lengths"}},
		{"blog", []string{"blog.0001_initial", "blog.0002_post_likes_alter_post_written"}},
		// Django's own apps: contenttypes.0002 drops a column of a
		// primary-key table (RemoveField), auth alters lengths and
		// nullability; post_migrate then creates their content types and
		// permissions.
		{"", []string{"contenttypes.0001_initial", "contenttypes.0002_remove_content_type_name", "auth.0001_initial",
			"auth.0002_alter_permission_name_max_length", "auth.0005_alter_user_last_login_null", "auth.0012_alter_user_first_name_max_length"}},
	} {
		args := []string{"migrate"}
		if step.app != "" {
			args = append(args, step.app)
		}
		out := manage(args...)
		for _, m := range step.migrations {
			if !strings.Contains(out, "Applying "+m+"... OK") {
				t.Fatalf("migrate %s did not apply %s:\n%s", step.app, m, out)
			}
		}
	}
	ctx := context.Background()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	query := func(sql string) []string {
		t.Helper()
		res, err := conn.PgConn().Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var rows []string
		for _, row := range res[0].Rows {
			vals := make([]string, len(row))
			for j, v := range row {
				vals[j] = string(v)
			}
			rows = append(rows, strings.Join(vals, "|"))
		}
		return rows
	}
	wantRows := func(sql string, want ...string) {
		t.Helper()
		if got := query(sql); !slices.Equal(got, want) {
			t.Errorf("%s\n got %q\nwant %q", sql, got, want)
		}
	}
	// Django's record of what it applied, and the columns it made: the
	// ones AddField added are NOT NULL without a default, as on PostgreSQL.
	wantRows("SELECT app, count(*) FROM django_migrations WHERE app IN ('auth', 'contenttypes') GROUP BY app ORDER BY app",
		"auth|12", "contenttypes|2")
	// contenttypes.0002 dropped the name column; the rows post_migrate
	// wrote after it read back, as on PostgreSQL.
	wantRows("SELECT column_name, data_type, character_maximum_length FROM information_schema.columns WHERE table_name = 'django_content_type' ORDER BY ordinal_position",
		"id|integer|", "app_label|character varying|100", "model|character varying|100")
	wantRows("SELECT app_label || '.' || model FROM django_content_type ORDER BY 1",
		"auth.group", "auth.permission", "auth.user", "blog.post", "contenttypes.contenttype", "shop.product")
	wantRows("SELECT count(*), count(DISTINCT content_type_id), max(length(name)) <= 255 FROM auth_permission", "24|6|t")
	wantRows("SELECT column_name, is_nullable, character_maximum_length FROM information_schema.columns WHERE table_name = 'auth_user' AND column_name IN ('last_login', 'username', 'first_name') ORDER BY ordinal_position",
		"last_login|YES|", "username|NO|150", "first_name|NO|150")
	wantRows("SELECT app, name FROM django_migrations WHERE app IN ('blog', 'shop') ORDER BY app, name",
		"blog|0001_initial", "blog|0002_post_likes_alter_post_written", "shop|0001_initial", "shop|0002_product_sku", "shop|0003_alter_product_lengths")
	wantRows("SELECT column_name, data_type, is_nullable, column_default IS NULL FROM information_schema.columns WHERE table_name = 'blog_post' ORDER BY ordinal_position",
		"id|bigint|NO|t", "title|character varying|NO|t", "body|text|NO|t", "published|boolean|NO|t",
		"written|timestamp with time zone|NO|t", "product_id|bigint|NO|t", "likes|integer|NO|t")
	// shop.0003's AlterFields: DROP NOT NULL, and TYPE varchar(n) longer.
	wantRows("SELECT column_name, data_type, character_maximum_length, is_nullable FROM information_schema.columns WHERE table_name = 'shop_product' ORDER BY ordinal_position",
		"id|bigint||NO", "name|character varying|200|NO", "description|text||YES", "price|numeric||NO", "stock|integer||NO",
		"active|boolean||NO", "created|timestamp with time zone||NO", "attributes|jsonb||NO", "sku|character varying|64|NO")

	out := manage("roundtrip")
	if got := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(got, djangoPeerLines) {
		t.Errorf("manage.py roundtrip\n got %q\nwant %q", got, djangoPeerLines)
	}
	wantRows("SELECT name, description, price, stock, active, attributes, sku FROM shop_product ORDER BY name",
		`bulk0||0.00|0|t|{"batch": 0}|`, `bulk1||1.00|0|t|{"batch": 1}|`, `bulk2||2.00|0|t|{"batch": 2}|`,
		"chair||45.50|10|f|{}|", `desk|solid oak|120.00|11|t|{"legs": 4}|`, "stool||9.00|0|t|{}|")
	wantRows("SELECT title, p.name, likes FROM blog_post JOIN shop_product p ON p.id = product_id", "Desks|desk|7")

	// Migrating again applies nothing, and Django sees the models as
	// their migrations left them.
	if out := manage("migrate", "blog"); !strings.Contains(out, "No migrations to apply.") {
		t.Errorf("migrate blog again:\n%s", out)
	}
	if out := manage("showmigrations", "shop", "blog"); strings.Count(out, "[X]") != 5 || strings.Contains(out, "[ ]") {
		t.Errorf("showmigrations:\n%s", out)
	}
	if out := manage("makemigrations", "--check", "--dry-run", "shop", "blog"); !strings.Contains(out, "No changes detected") {
		t.Errorf("makemigrations --check:\n%s", out)
	}

	// loaddata stores rows with their own ids, then resets the sequence
	// (setval(pg_get_serial_sequence(…), max(id))): the next row Django
	// creates takes the id after the fixture's, as on PostgreSQL.
	if out := manage("loaddata", "products"); !strings.Contains(out, "Installed 2 object(s) from 1 fixture(s)") {
		t.Fatalf("loaddata:\n%s", out)
	}
	wantRows("SELECT id, name, attributes FROM shop_product WHERE id >= 100 ORDER BY id", `100|fixture100|{"from": "fixture"}`, "101|fixture101|{}")
	wantRows("SELECT pg_get_serial_sequence('shop_product', 'id')", "public.shop_product_id_seq")
	if out := manage("shell", "-c", "from shop.models import Product; from django.utils import timezone; print('pk', Product.objects.create(name='after', price=3, created=timezone.now()).pk)"); !strings.Contains(out, "pk 102\n") {
		t.Errorf("the product created after loaddata: %q, want id 102", out)
	}
}
