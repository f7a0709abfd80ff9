// Command rustbench measures the Rust client (clients/rust) against the Go
// client: bulk append and scan throughput on the same table in one run
// (bench.MeasureRustClient), and prints a markdown table for
// bench/RESULTS.md headed by the command, the machine and the date.
//
//	go run -tags duckdb_arrow ./bench/cmd/rustbench
//	go run -tags duckdb_arrow ./bench/cmd/rustbench -rows 1000000 -runs 5
//
// It builds the Rust examples with cargo (into CARGO_TARGET_DIR, by
// default ~/.cache/mink/cargo-target) unless -examples names them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/minkdb/mink/bench"
)

func main() {
	var cfg bench.RustClientConfig
	flag.IntVar(&cfg.Rows, "rows", 0, "rows each client appends per append run (default 2000000)")
	flag.IntVar(&cfg.AppendRuns, "append-runs", 0, "append runs of each client; the median is reported (default 3)")
	flag.IntVar(&cfg.BatchRows, "batch-rows", 0, "rows per append call (default 262144)")
	flag.IntVar(&cfg.Writers, "writers", 0, "concurrent writers of each client (default 4)")
	flag.IntVar(&cfg.Runs, "runs", 0, "scans of each client; the median is reported (default 3)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for mink's data (default: the temp dir)")
	flag.StringVar(&cfg.Examples, "examples", "", "directory of the built Rust examples (default: build them with cargo)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.Examples == "" {
		dir, err := buildExamples()
		if err != nil {
			fmt.Fprintln(os.Stderr, "rustbench:", err)
			os.Exit(1)
		}
		cfg.Examples = dir
	}
	host, _ := os.Hostname()
	fmt.Printf("`go run -tags duckdb_arrow ./bench/cmd/rustbench %s` on %s (%s/%s, %d CPUs, %s), %s\n\n",
		strings.Join(os.Args[1:], " "), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	if err := bench.RunRustClient(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "rustbench:", err)
		os.Exit(1)
	}
}

func buildExamples() (string, error) {
	target := os.Getenv("CARGO_TARGET_DIR")
	if target == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		target = filepath.Join(cache, "mink", "cargo-target")
	}
	cmd := exec.Command("cargo", "build", "--release", "-j2", "--examples", "--manifest-path", "clients/rust/Cargo.toml")
	cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+target)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cargo build --examples (run from the repository root): %w", err)
	}
	return filepath.Join(target, "release", "examples"), nil
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
