package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	ordersSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "customer", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "region", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	regionsSchema = arrow.NewSchema([]arrow.Field{
		{Name: "region", Type: arrow.PrimitiveTypes.Int32},
		{Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
)

const ordersRows = `[
{"id": 1, "customer": "ann", "amount": "9.50", "region": 1},
{"id": 2, "customer": "bob", "amount": "20.00", "region": 2},
{"id": 3, "customer": "ann", "amount": "0.50", "region": 1},
{"id": 4, "customer": "cid", "amount": null, "region": 3},
{"id": 5, "customer": null, "amount": "1.00", "region": null}
]`

const regionsRows = `[{"region": 1, "name": "north"}, {"region": 2, "name": "south"}]`

func ordersConn(t *testing.T) *Conn {
	c := openConn(t, openDB(t, Options{}))
	register(t, c, "orders", fromJSON(t, ordersSchema, ordersRows))
	register(t, c, "regions", fromJSON(t, regionsSchema, regionsRows))
	return c
}

func TestAnalyticQueries(t *testing.T) {
	c := ordersConn(t)
	// Group-by aggregate; NULLs sort last ascending, as in PostgreSQL.
	expectRows(t, c, "SELECT customer, sum(amount), count(*) FROM orders GROUP BY customer ORDER BY customer",
		"ann|10.00|2", "bob|20.00|1", "cid|NULL|1", "NULL|1.00|1")
	// ... and first descending.
	expectRows(t, c, "SELECT customer FROM orders ORDER BY customer DESC",
		"NULL", "cid", "bob", "ann", "ann")
	// Join of two registered sources.
	expectRows(t, c, `SELECT r.name, sum(o.amount) FROM orders o JOIN regions r ON o.region = r.region
		GROUP BY r.name ORDER BY r.name`, "north|10.00", "south|20.00")
	expectRows(t, c, `SELECT o.id, r.name FROM orders o LEFT JOIN regions r USING (region) ORDER BY o.id`,
		"1|north", "2|south", "3|north", "4|NULL", "5|NULL")
	// Window function.
	expectRows(t, c, `SELECT id, rank() OVER (PARTITION BY customer ORDER BY amount DESC),
		sum(amount) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
		FROM orders WHERE customer IS NOT NULL ORDER BY id`,
		"1|1|9.50", "2|1|29.50", "3|2|30.00", "4|1|30.00")
	// CTE referenced twice, and a self-join: the source is read once per
	// reference.
	expectRows(t, c, `WITH big AS (SELECT * FROM orders WHERE amount >= 1)
		SELECT (SELECT count(*) FROM big), (SELECT max(amount) FROM big)`, "3|20.00")
	expectRows(t, c, `SELECT a.id, b.id FROM orders a JOIN orders b ON a.customer = b.customer AND a.id < b.id`, "1|3")
	expectRows(t, c, `SELECT count(*) FROM orders WHERE amount > (SELECT avg(amount) FROM orders)`, "2")
	// Integer division as in PostgreSQL.
	expectRows(t, c, "SELECT 7 / 2, -7 / 2, 7.0 / 2", "3|-3|3.5")
	// Statements run in sequence; the last one's rows are returned.
	expectRows(t, c, "CREATE TEMP TABLE x AS SELECT 41 AS v; SELECT v + 1 FROM x", "42")
}

// recordingSource records the columns each Open asks for.
type recordingSource struct {
	*Records
	mu     sync.Mutex
	opened [][]int
}

func (s *recordingSource) Open(ctx context.Context, columns []int) (array.RecordReader, error) {
	s.mu.Lock()
	s.opened = append(s.opened, append([]int(nil), columns...))
	s.mu.Unlock()
	return s.Records.Open(ctx, columns)
}

func TestProjectionPushdown(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	rec := fromJSON(t, ordersSchema, ordersRows)
	src := &recordingSource{Records: RecordsSource(ordersSchema, []arrow.RecordBatch{rec})}
	defer src.Release()
	rel, err := c.Register(context.Background(), "orders", src)
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	expectRows(t, c, "SELECT sum(amount) FROM orders WHERE region = 1", "10.00")
	expectRows(t, c, "SELECT count(*) FROM orders", "5")
	expectRows(t, c, "SELECT count(*) FROM orders a JOIN orders b USING (id)", "5")
	// count(*) asks for one column: DuckDB needs a vector to count.
	want := [][]int{{2, 3}, {0}, {0}, {0}}
	if fmt.Sprint(src.opened) != fmt.Sprint(want) {
		t.Errorf("columns opened: %v, want %v", src.opened, want)
	}
}

// TestLargeSource scans a multi-batch source with several threads.
func TestLargeSource(t *testing.T) {
	c := openConn(t, openDB(t, Options{Threads: 4}))
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	var recs []arrow.RecordBatch
	const batches, perBatch = 20, 10_000
	for b := 0; b < batches; b++ {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := 0; i < perBatch; i++ {
			bld.Field(0).(*array.Int64Builder).Append(int64(b*perBatch + i))
			bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", i%7))
		}
		recs = append(recs, bld.NewRecordBatch())
		bld.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	register(t, c, "big", recs...)
	n := batches * perBatch
	expectRows(t, c, "SELECT count(*), sum(v), count(DISTINCT s) FROM big", fmt.Sprintf("%d|%d|7", n, n*(n-1)/2))
	expectRows(t, c, "SELECT v FROM big ORDER BY v DESC LIMIT 2", fmt.Sprint(n-1), fmt.Sprint(n-2))
}

// TestConcurrentConns: two sessions register different data under the same
// view name and query it concurrently; each sees its own.
func TestConcurrentConns(t *testing.T) {
	db := openDB(t, Options{Threads: 2})
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for k := 1; k <= 2; k++ {
		c := openConn(t, db)
		rows := "["
		for i := 0; i < 1000; i++ {
			if i > 0 {
				rows += ","
			}
			rows += fmt.Sprintf(`{"v": %d}`, k)
		}
		register(t, c, "t", fromJSON(t, schema, rows+"]"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				rs, err := c.Query(context.Background(), "SELECT sum(v) FROM t a JOIN (SELECT DISTINCT v FROM t) b USING (v)")
				if err != nil {
					errs <- err
					return
				}
				rs.Next()
				got := rs.Values()[0]
				rs.Close()
				if want := fmt.Sprint(1000 * k); text(got) != want {
					errs <- fmt.Errorf("session %d saw sum %v", k, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSessionsIsolated: a view registered in one session does not exist in
// another, and its key does not work there either.
func TestSessionsIsolated(t *testing.T) {
	db := openDB(t, Options{})
	a, b := openConn(t, db), openConn(t, db)
	register(t, a, "orders", fromJSON(t, ordersSchema, ordersRows))
	expectRows(t, a, "SELECT count(*) FROM orders", "5")
	_, err := b.Query(context.Background(), "SELECT count(*) FROM orders")
	if sqlState(err) != CodeUndefinedTable {
		t.Errorf("other session: %v", err)
	}
	_, err = b.Query(context.Background(), "SELECT * FROM mink_scan('0123456789abcdef0123456789abcdef')")
	if err == nil {
		t.Errorf("mink_scan with a made-up key succeeded")
	}
}

// TestRelease: a released view is gone; registering the name again works.
func TestRelease(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	ctx := context.Background()
	rec := fromJSON(t, ordersSchema, ordersRows)
	rel, err := c.RegisterRecords(ctx, "orders", ordersSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	expectRows(t, c, "SELECT count(*) FROM orders", "5")
	rel()
	rel() // idempotent
	if _, err := c.Query(ctx, "SELECT count(*) FROM orders"); sqlState(err) != CodeUndefinedTable {
		t.Errorf("after release: %v", err)
	}
	register(t, c, "orders", fromJSON(t, regionsSchema, regionsRows))
	expectRows(t, c, "SELECT count(*) FROM orders", "2")
	// Replacing a registration.
	register(t, c, "orders", fromJSON(t, ordersSchema, ordersRows))
	expectRows(t, c, "SELECT count(*) FROM orders", "5")
}

// TestReaderSource: a one-shot reader can be read once.
func TestReaderSource(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	ctx := context.Background()
	rec := fromJSON(t, ordersSchema, ordersRows)
	rdr, err := array.NewRecordReader(ordersSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c.RegisterArrow(ctx, "orders", rdr)
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	expectRows(t, c, "SELECT sum(id) FROM orders", "15")
	_, err = c.Query(ctx, "SELECT sum(id) FROM orders")
	if !errors.Is(err, ErrSourceConsumed) {
		t.Errorf("second read: %v", err)
	}
}

// TestStreamingResultSurvivesNextStatement: a result still being read when
// the next statement starts is buffered and reads to the end.
func TestStreamingResultSurvivesNextStatement(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	ctx := context.Background()
	rows, err := c.Query(ctx, "SELECT range AS v FROM range(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	rows.Next()
	expectRows(t, c, "SELECT 1", "1")
	n, sum := 1, int64(0)
	for rows.Next() {
		n++
		sum += rows.Values()[0].(int64)
	}
	if err := rows.Err(); err != nil || n != 10000 || sum != 10000*9999/2 {
		t.Errorf("n=%d sum=%d err=%v", n, sum, err)
	}
}

// TestDescribe describes a statement without executing it: the source is
// bound but not opened.
func TestDescribe(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	rec := fromJSON(t, ordersSchema, ordersRows)
	src := &recordingSource{Records: RecordsSource(ordersSchema, []arrow.RecordBatch{rec})}
	defer src.Release()
	rel, err := c.Register(context.Background(), "orders", src)
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	d, err := c.Describe(context.Background(), "SELECT customer, sum(amount) AS total, $1::DATE AS d FROM orders WHERE id > $2 GROUP BY customer")
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, col := range d.Columns {
		got += fmt.Sprintf("%s %s %d %d; ", col.Name, col.Type, col.Type.OID(), col.Type.TypMod())
	}
	if want := "customer text 25 -1; total numeric(38,2) 1700 2490374; d date 1082 -1; "; got != want {
		t.Errorf("columns: %s, want %s", got, want)
	}
	if len(d.Params) != 2 || d.Params[0].Name() != "date" || d.Params[1].Name() != "bigint" {
		t.Errorf("params: %v", d.Params)
	}
	if len(src.opened) != 0 {
		t.Errorf("Describe opened the source: %v", src.opened)
	}
	if _, err := c.Describe(context.Background(), "SELECT 1; SELECT 2"); sqlState(err) != CodeSyntaxError {
		t.Errorf("two statements: %v", err)
	}
}

// TestNoFileAccess: SQL cannot read files outside AllowedDirectories.
func TestNoFileAccess(t *testing.T) {
	dir := t.TempDir()
	c := openConn(t, openDB(t, Options{AllowedDirectories: []string{dir}}))
	_, err := c.Query(context.Background(), "SELECT * FROM read_csv('/etc/passwd')")
	if sqlState(err) != CodeInsufficientPrivilege {
		t.Errorf("read_csv(/etc/passwd): %v (%s)", err, sqlState(err))
	}
	if err := c.Exec(context.Background(), fmt.Sprintf("COPY (SELECT 42 AS v) TO '%s/x.parquet' (FORMAT parquet)", dir)); err != nil {
		t.Fatal(err)
	}
	expectRows(t, c, fmt.Sprintf("SELECT v FROM read_parquet('%s/x.parquet')", dir), "42")
	if err := c.Exec(context.Background(), "SET enable_external_access = true"); err == nil {
		t.Errorf("external access could be re-enabled")
	}
}
