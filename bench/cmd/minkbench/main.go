// Command minkbench runs mink's benchmarks against their peers and prints
// markdown tables for bench/RESULTS.md, headed by the command, the machine
// and the date.
//
//	go run ./bench/cmd/minkbench all
//	go run ./bench/cmd/minkbench s3stream -dir /mnt/disk
//	go run -tags duckdb_arrow ./bench/cmd/minkbench -kafka-s3 kafka
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minkdb/mink/bench"
)

// pkOnly is the -pk-only flag: the pk workloads to run.
var pkOnly = flag.String("pk-only", "", `pk: run only the workloads whose name starts with this (e.g. "point lookup")`)

// cpuProfile is the -cpuprofile flag of the flightread, pgbench and ingest workloads.
var cpuProfile = flag.String("cpuprofile", "", "flightread: write a CPU profile of extra Flight reads (server and reader) to this file; "+
	"pgbench: of the mink node during its 8-client INSERT run (the upsert's to FILE.upsert); "+
	"ingest: of the whole load (the node and the pgx client)")

// The kafka workload's flags.
var (
	kafkaMinkBin = flag.String("mink-bin", "", "kafka, restart: the mink binary to run (default: build cmd/mink)")
	kafkaS3      = flag.Bool("kafka-s3", false, "kafka: also measure a mink node on versitygw (S3 over loopback)")
	kafkaRecords = flag.Int("kafka-records", 0, "kafka: records per run (default 200000)")
	kafkaRuns    = flag.Int("kafka-runs", 0, "kafka: runs of every configuration (default 2)")
	kafkaNoMink  = flag.Bool("kafka-skip-mink", false, "kafka: measure Apache Kafka only")
	kafkaParts   = flag.String("kafka-partitions", "", "kafka: comma-separated topic sizes (default 4,64)")
)

type workload func(ctx context.Context, dir string, quick bool) error

var workloads = map[string]workload{
	"objstore": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.ObjstoreConfig{Dir: dir}
		if quick {
			cfg.Ops, cfg.Sizes = 64, []int{4 << 10, 1 << 20}
		}
		return bench.RunObjstore(ctx, os.Stdout, cfg)
	},
	"metadata": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.MetadataConfig{Dir: dir}
		if quick {
			cfg.Proposals = 200
		}
		return bench.RunMetadata(ctx, os.Stdout, cfg)
	},
	"s3stream": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.S3StreamConfig{Dir: dir}
		if quick {
			cfg.Duration = time.Second
		}
		return bench.RunS3Stream(ctx, os.Stdout, cfg)
	},
	"ingest": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.IngestConfig{Dir: dir, CPUProfile: *cpuProfile}
		if quick {
			cfg.Rows, cfg.ChunkRows = 200_000, 50_000
		}
		return bench.RunIngest(ctx, os.Stdout, cfg)
	},
	"insert-select": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.InsertSelectConfig{Dir: dir}
		if quick {
			cfg.Rows, cfg.Runs = 200_000, 1
		}
		return bench.RunInsertSelect(ctx, os.Stdout, cfg)
	},
	"flight": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.FlightConfig{Dir: dir}
		if quick {
			cfg.Rows, cfg.ChunkRows, cfg.BatchRows, cfg.Runs = 200_000, 50_000, 20_000, 1
		}
		return bench.RunFlight(ctx, os.Stdout, cfg)
	},
	"flightread": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.FlightReadConfig{Dir: dir, CPUProfile: *cpuProfile}
		if quick {
			cfg.Rows, cfg.ChunkRows, cfg.Runs = 200_000, 50_000, 1
		}
		return bench.RunFlightRead(ctx, os.Stdout, cfg)
	},
	"flightsql": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.FlightSQLConfig{Dir: dir}
		if quick {
			cfg.Rows, cfg.ChunkRows, cfg.Runs = 200_000, 50_000, 1
		}
		return bench.RunFlightSQL(ctx, os.Stdout, cfg)
	},
	"pk": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.PKConfig{Dir: dir, Only: *pkOnly}
		if quick {
			cfg.Rows, cfg.Duration = 100_000, 3*time.Second
		}
		return bench.RunPK(ctx, os.Stdout, cfg)
	},
	"pgbench": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.PgbenchConfig{Dir: dir, CPUProfile: *cpuProfile}
		if quick {
			cfg.Rows, cfg.Duration, cfg.Runs = 10_000, 2*time.Second, 1
		}
		return bench.RunPgbench(ctx, os.Stdout, cfg)
	},
	"failover": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.FailoverConfig{Dir: dir}
		if quick {
			cfg.ShortRuns, cfg.DefaultRuns = 1, -1
		}
		return bench.RunFailover(ctx, os.Stdout, cfg)
	},
	"recovery": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.RecoveryConfig{Dir: dir}
		if quick {
			cfg.StateBytes, cfg.ChangelogBytes = 64<<20, 8<<20
		}
		return bench.RunRecovery(ctx, os.Stdout, cfg)
	},
	"restart": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.RestartConfig{Dir: dir, Bin: *kafkaMinkBin}
		if quick {
			cfg.StateBytes, cfg.CrashBytes = 32<<20, 2<<20
		}
		return bench.RunRestart(ctx, os.Stdout, cfg)
	},
	"throughput": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.ThroughputConfig{Dir: dir}
		if quick {
			cfg.Duration = 2 * time.Second
		}
		return bench.RunThroughput(ctx, os.Stdout, cfg)
	},
	"tiering": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.TieringConfig{Dir: dir}
		if quick {
			cfg.Rows = 200_000
		}
		return bench.RunTiering(ctx, os.Stdout, cfg)
	},
	"tiering-pk": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.TieringPKConfig{Dir: dir}
		if quick {
			cfg.Keys, cfg.Changes, cfg.Rounds = 50_000, 5_000, 2
		}
		return bench.RunTieringPK(ctx, os.Stdout, cfg)
	},
	"tiering-lag": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.TieringLagConfig{Dir: dir}
		if quick {
			cfg.Duration = 3 * time.Second
		}
		return bench.RunTieringLag(ctx, os.Stdout, cfg)
	},
	"lake-compact": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.LakeCompactConfig{Dir: dir}
		if quick {
			cfg.Rows, cfg.Rounds = 100_000, 20
		}
		return bench.RunLakeCompact(ctx, os.Stdout, cfg)
	},
	"lakequery": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.LakeQueryConfig{Dir: dir}
		if quick {
			cfg.Rows, cfg.ChunkRows, cfg.Runs = 200_000, 50_000, 3
		}
		return bench.RunLakeQuery(ctx, os.Stdout, cfg)
	},
	"kafka": func(ctx context.Context, dir string, quick bool) error {
		// The peer is assembled from Maven Central on first use.
		if out, err := bench.InstallKafka(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "minkbench: kafka: %v\n%s", err, out)
		}
		cfg := bench.KafkaConfig{Dir: dir, MinkBin: *kafkaMinkBin, MinkS3: *kafkaS3, Records: *kafkaRecords,
			Runs: *kafkaRuns, SkipMink: *kafkaNoMink, ClientLog: os.Stderr}
		for _, f := range strings.FieldsFunc(*kafkaParts, func(r rune) bool { return r == ',' }) {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("-kafka-partitions: %q is not a partition count", f)
			}
			cfg.Partitions = append(cfg.Partitions, n)
		}
		if quick {
			cfg.Records, cfg.Runs = 20_000, 1
		}
		return bench.RunKafka(ctx, os.Stdout, cfg)
	},
	"security": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.SecurityConfig{Dir: dir}
		if quick {
			cfg.Duration, cfg.Rows = 2*time.Second, 10_000
		}
		return bench.RunSecurity(ctx, os.Stdout, cfg)
	},
	"query": func(ctx context.Context, dir string, quick bool) error {
		cfg := bench.QueryConfig{Dir: dir}
		if quick {
			cfg.Rows, cfg.ChunkRows, cfg.Runs = 200_000, 50_000, 3
		}
		return bench.RunQuery(ctx, os.Stdout, cfg)
	},
}

func main() {
	dir := flag.String("dir", "", "directory on the disk to measure (default: the temp dir)")
	quick := flag.Bool("quick", false, "short runs, for a smoke test")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: minkbench [-dir DIR] [-quick] all|%s...\n", strings.Join(names(), "|"))
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if len(args) == 1 && args[0] == "all" {
		args = names()
	}
	for _, name := range args {
		if workloads[name] == nil {
			fmt.Fprintf(os.Stderr, "minkbench: unknown workload %q\n", name)
			flag.Usage()
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("command: minkbench %s\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("machine: %s, %d cores, %s %s/%s\n\n", cpuModel(), runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range args {
		fmt.Printf("## %s\n\n", name)
		if err := workloads[name](ctx, *dir, *quick); err != nil {
			fmt.Fprintf(os.Stderr, "minkbench: %s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Println()
	}
}

func names() []string {
	var out []string
	for name := range workloads {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
