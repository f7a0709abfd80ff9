// Command enginebench measures how fast the embedded DuckDB queries data fed
// as Arrow through sqlfront/engine (the way mink runs SELECT), against the
// same DuckDB querying the same rows loaded into a native DuckDB table and
// read from a Parquet file with read_parquet.
//
//	go run -tags duckdb_arrow ./sqlfront/engine/internal/enginebench [-rows 10000000] [-runs 5]
//
// It prints one line per query and variant (median and best of the runs)
// and the process's peak RSS. Variants run interleaved, round by round, so
// that load from other processes hits them alike.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/sqlfront/engine"
)

var (
	rowsFlag    = flag.Int("rows", 10_000_000, "rows in the big table")
	runsFlag    = flag.Int("runs", 5, "timed runs per query and variant")
	threadsFlag = flag.Int("threads", runtime.NumCPU(), "DuckDB threads")
	batchFlag   = flag.Int("batch", 64*1024, "rows per Arrow batch of the source")
	queryFlag   = flag.String("query", "", "time only this query instead of the standard ones (%[1]s is the big table, %[2]s the small one)")
	explainFlag = flag.String("explain", "", "print EXPLAIN ANALYZE of the named query for each variant, then exit")
	profileFlag = flag.String("cpuprofile", "", "write a CPU profile of the timed runs of mink's variant to this file")
)

// The 8-column table, a narrow fact table like the ingest benchmark.
var factSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "region", Type: arrow.PrimitiveTypes.Int32},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "category", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

var regionSchema = arrow.NewSchema([]arrow.Field{
	{Name: "region", Type: arrow.PrimitiveTypes.Int32},
	{Name: "region_name", Type: arrow.BinaryTypes.String},
}, nil)

var queries = []struct{ name, sql string }{
	{"count", "SELECT count(*) FROM %[1]s"},
	{"group-by", "SELECT category, count(*), sum(amount), avg(price) FROM %[1]s GROUP BY category ORDER BY category"},
	{"filter+top-N", "SELECT id, name, amount FROM %[1]s WHERE region = 7 AND price > 900 ORDER BY amount DESC LIMIT 10"},
	{"join small", "SELECT r.region_name, count(*), sum(f.amount) FROM %[1]s f JOIN %[2]s r ON f.region = r.region GROUP BY r.region_name ORDER BY 3 DESC LIMIT 10"},
	// Not one of the queries: reads every column of every row, which
	// shows the cost of feeding Arrow to DuckDB.
	{"full scan", "SELECT count(*), sum(id), sum(user_id), sum(region), sum(amount), sum(price), max(name), max(category), max(ts) FROM %[1]s"},
}

func main() {
	flag.Parse()
	if *queryFlag != "" {
		queries = []struct{ name, sql string }{{"query", *queryFlag}}
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "enginebench")
	check(err)
	defer os.RemoveAll(dir)

	t0 := time.Now()
	facts := generate(*rowsFlag, *batchFlag)
	regions := generateRegions()
	fmt.Printf("generated %d rows in %d batches in %v; RSS %s\n", *rowsFlag, len(facts), time.Since(t0).Round(time.Millisecond), rss("VmRSS"))

	db, err := engine.Open(engine.Options{Threads: *threadsFlag, AllowedDirectories: []string{dir}})
	check(err)
	defer db.Close()
	c, err := db.Conn(ctx, engine.ConnOptions{})
	check(err)
	defer c.Close()

	src := engine.RecordsSource(factSchema, facts)
	release, err := c.Register(ctx, "facts", src)
	check(err)
	defer release()
	relRegions, err := c.RegisterRecords(ctx, "regions", regionSchema, regions)
	check(err)
	defer relRegions()

	t0 = time.Now()
	check(c.Exec(ctx, "CREATE TABLE facts_native AS SELECT * FROM facts; CREATE TABLE regions_native AS SELECT * FROM regions"))
	fmt.Printf("loaded the native DuckDB table in %v\n", time.Since(t0).Round(time.Millisecond))
	parquet := filepath.Join(dir, "facts.parquet")
	t0 = time.Now()
	check(c.Exec(ctx, fmt.Sprintf("COPY facts_native TO '%s' (FORMAT parquet, ROW_GROUP_SIZE 122880)", parquet)))
	check(c.Exec(ctx, fmt.Sprintf("COPY regions_native TO '%s' (FORMAT parquet)", filepath.Join(dir, "regions.parquet"))))
	st, err := os.Stat(parquet)
	check(err)
	fmt.Printf("wrote %s (%d MB) in %v\n", parquet, st.Size()>>20, time.Since(t0).Round(time.Millisecond))
	check(c.Exec(ctx, fmt.Sprintf("CREATE VIEW facts_parquet AS SELECT * FROM read_parquet('%s'); CREATE VIEW regions_parquet AS SELECT * FROM read_parquet('%s')",
		parquet, filepath.Join(dir, "regions.parquet"))))

	variants := []struct{ name, facts, regions string }{
		{"mink (Arrow via mink_scan)", "facts", "regions"},
		{"DuckDB native table", "facts_native", "regions_native"},
		{"DuckDB read_parquet", "facts_parquet", "regions_parquet"},
	}
	if *explainFlag != "" {
		for _, q := range queries {
			if q.name != *explainFlag {
				continue
			}
			for _, v := range variants {
				rows, err := c.Query(ctx, "EXPLAIN ANALYZE "+fmt.Sprintf(q.sql, v.facts, v.regions))
				check(err)
				for rows.Next() {
					fmt.Println(rows.Values()[1])
				}
				check(rows.Err())
				rows.Close()
			}
		}
		return
	}
	fmt.Printf("\n%s, nproc %d, DuckDB threads %d, %d rows, median (best) of %d runs after 1 warm-up\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), *threadsFlag, *rowsFlag, *runsFlag)
	fmt.Printf("%-14s %-28s %12s %12s %8s\n", "query", "variant", "median", "best", "ratio")
	if *profileFlag != "" {
		f, err := os.Create(*profileFlag)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	for _, q := range queries {
		times := make([][]time.Duration, len(variants))
		var results []string
		for round := 0; round <= *runsFlag; round++ {
			for v, variant := range variants {
				sql := fmt.Sprintf(q.sql, variant.facts, variant.regions)
				start := time.Now()
				out := run(ctx, c, sql)
				d := time.Since(start)
				if round == 0 {
					results = append(results, out)
					continue
				}
				times[v] = append(times[v], d)
			}
		}
		for v := range variants {
			if results[v] != results[0] {
				fmt.Printf("!! %s: %s returned %q, %s returned %q\n", q.name, variants[v].name, results[v], variants[0].name, results[0])
			}
		}
		base := median(times[1])
		for v, variant := range variants {
			med := median(times[v])
			fmt.Printf("%-14s %-28s %12s %12s %7.2fx\n", q.name, variant.name, fmtDur(med), fmtDur(slices.Min(times[v])), float64(med)/float64(base))
		}
	}
	fmt.Printf("\npeak RSS (VmHWM) %s\n", rss("VmHWM"))
}

// run executes sql and returns its result as text.
func run(ctx context.Context, c *engine.Conn, sql string) string {
	rows, err := c.Query(ctx, sql)
	check(err)
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		for _, v := range rows.Values() {
			// Sums of doubles differ in the last digits with the order
			// of addition.
			if f, ok := v.(float64); ok {
				v = strconv.FormatFloat(f, 'g', 9, 64)
			}
			fmt.Fprint(&sb, v, " ")
		}
		sb.WriteByte('\n')
	}
	check(rows.Err())
	return sb.String()
}

var categories = []string{"books", "games", "garden", "kitchen", "music", "office", "outdoor", "pets", "shoes", "sports",
	"tools", "toys", "travel", "video", "watches", "baby", "beauty", "car", "computers", "health"}

func generate(rows, batch int) []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("customer-%05d", i)
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var out []arrow.RecordBatch
	for start := 0; start < rows; start += batch {
		n := min(batch, rows-start)
		b := array.NewRecordBuilder(memory.DefaultAllocator, factSchema)
		for _, f := range b.Fields() {
			f.Reserve(n)
		}
		id := b.Field(0).(*array.Int64Builder)
		user := b.Field(1).(*array.Int64Builder)
		region := b.Field(2).(*array.Int32Builder)
		amount := b.Field(3).(*array.Float64Builder)
		price := b.Field(4).(*array.Float64Builder)
		name := b.Field(5).(*array.StringBuilder)
		cat := b.Field(6).(*array.StringBuilder)
		ts := b.Field(7).(*array.TimestampBuilder)
		for i := 0; i < n; i++ {
			id.UnsafeAppend(int64(start + i))
			user.UnsafeAppend(rng.Int64N(100_000))
			region.UnsafeAppend(rng.Int32N(100))
			amount.UnsafeAppend(float64(rng.IntN(1_000_000)) / 100)
			price.UnsafeAppend(float64(rng.IntN(100_000)) / 100)
			name.Append(names[rng.IntN(len(names))])
			cat.Append(categories[rng.IntN(len(categories))])
			ts.UnsafeAppend(arrow.Timestamp(base + int64(start+i)*1000))
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

func generateRegions() []arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, regionSchema)
	defer b.Release()
	for i := 0; i < 100; i++ {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("region-%02d", i%40))
	}
	return []arrow.RecordBatch{b.NewRecordBatch()}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// rss returns a memory line of /proc/self/status.
func rss(key string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key+":") {
			return strings.TrimSpace(strings.TrimPrefix(line, key+":"))
		}
	}
	return "?"
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}
