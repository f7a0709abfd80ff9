package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/internal/testpki"
	"github.com/minkdb/mink/server"
)

// SecurityConfig configures RunSecurity. Zero values mean the defaults.
type SecurityConfig struct {
	Dir string
	// Duration of each connection-rate and pgbench run. Default 10 s.
	Duration time.Duration
	// Rows in the point-lookup table. Default 100 000.
	Rows int
}

func (c *SecurityConfig) fill() {
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rows == 0 {
		c.Rows = 100_000
	}
}

const (
	benchRole     = "bench"
	benchPassword = "bench password"
	secDDL        = "CREATE TABLE secbench (id integer PRIMARY KEY, v text)"
	secLogDDL     = "CREATE TABLE seclog (id integer, v text)"
)

// RunSecurity measures what authentication and authorization cost, on mink
// and on PostgreSQL set up alike (TLS on, SCRAM-SHA-256 for the role
// bench): connections set up per second (TLS handshake, SCRAM exchange,
// session start), and pgbench point lookups and single-row inserts as a
// superuser (no privilege check) and as bench, which holds its privileges
// through a group role (the full check).
func RunSecurity(ctx context.Context, w io.Writer, cfg SecurityConfig) error {
	cfg.fill()
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return fmt.Errorf("security bench needs pgbench (Debian: apt-get install -y postgresql-client): %w", err)
	}
	base, err := os.MkdirTemp(cfg.Dir, "mink-bench-security-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		return err
	}
	certPEM, keyPEM, err := selfSignedCert()
	if err != nil {
		return err
	}
	certFile, keyFile, pwFile := filepath.Join(base, "cert.pem"), filepath.Join(base, "key.pem"), filepath.Join(base, "superuser")
	for f, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, pwFile: []byte("root password\n")} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
	}
	node, err := minktest.StartNode(minktest.Options{DataDir: filepath.Join(base, "mink"), Tweak: func(c *server.Config) {
		c.TLSCertFile, c.TLSKeyFile, c.SuperuserPasswordFile = certFile, keyFile, pwFile
	}}, nil)
	if err != nil {
		return fmt.Errorf("start mink: %w", err)
	}
	defer node.Server.Close()
	host, port, _ := net.SplitHostPort(node.Config.PGAddr)
	minkAdmin := fmt.Sprintf("host=%s port=%s user=mink password='root password' dbname=mink sslmode=require", host, port)
	minkRole := fmt.Sprintf("host=%s port=%s user=%s password='%s' dbname=mink sslmode=require", host, port, benchRole, benchPassword)

	pg, err := StartPostgresWith(ctx, base, PostgresOptions{TLSCert: certPEM, TLSKey: keyPEM,
		// TLS connections (the measured ones) give passwords; the
		// harness's own plaintext connection as postgres is trusted.
		HBA: "hostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all postgres 127.0.0.1/32 trust\n"})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer pg.Stop()
	pgCfg, err := pgx.ParseConfig(pg.DSN)
	if err != nil {
		return err
	}
	setup, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		return err
	}
	_, err = setup.Exec(ctx, "ALTER ROLE postgres PASSWORD 'root password'")
	setup.Close(ctx)
	if err != nil {
		return err
	}
	pgAdmin := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password='root password' dbname=postgres sslmode=require", pgCfg.Port)
	pgRole := fmt.Sprintf("host=127.0.0.1 port=%d user=%s password='%s' dbname=postgres sslmode=require", pgCfg.Port, benchRole, benchPassword)

	systems := []struct{ name, admin, role string }{{"mink", minkAdmin, minkRole}, {pg.peerName(), pgAdmin, pgRole}}
	for _, s := range systems {
		if err := setupSecurity(ctx, s.admin, cfg.Rows); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}

	fmt.Fprintf(w, "### Security: connection setup and privilege checks\n\n")
	fmt.Fprintf(w, "TLS (sslmode=require) and SCRAM-SHA-256 on both; %v per run.\n\n", cfg.Duration)
	fmt.Fprintf(w, "| connections set up per second (connect, TLS, SCRAM, first query, close) | clients | mink | %s | mink / PostgreSQL |\n| --- | --- | --- | --- | --- |\n", pg.peerName())
	for _, clients := range []int{1, 4} {
		var rates []float64
		for _, s := range systems {
			r, err := connectionRate(ctx, s.role, clients, cfg.Duration)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			rates = append(rates, r)
		}
		fmt.Fprintf(w, "| as %s | %d | %.0f | %.0f | %.2f |\n", benchRole, clients, rates[0], rates[1], rates[0]/rates[1])
	}
	fmt.Fprintln(w)

	scripts := []struct{ name, sql string }{
		{"point lookup", fmt.Sprintf("\\set aid random(1, %d)\nSELECT id, v FROM secbench WHERE id = :aid;\n", cfg.Rows)},
		{"insert, 1 row", "\\set aid random(1, 1000000)\nINSERT INTO seclog VALUES (:aid, 'row');\n"},
	}
	fmt.Fprintf(w, "| pgbench, 1 client, tps | mink superuser | mink %s | checked / superuser | %s superuser | %s %s | checked / superuser |\n| --- | --- | --- | --- | --- | --- | --- |\n",
		benchRole, pg.peerName(), pg.peerName(), benchRole)
	for _, sc := range scripts {
		file := filepath.Join(base, "script.sql")
		if err := os.WriteFile(file, []byte(sc.sql), 0o644); err != nil {
			return err
		}
		var tps []float64
		for _, s := range systems {
			for _, dsn := range []string{s.admin, s.role} {
				r, err := runPgbench(ctx, pgbench, dsn, file, 1, cfg.Duration)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", s.name, sc.name, err)
				}
				tps = append(tps, r)
			}
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.3f | %.0f | %.0f | %.3f |\n", sc.name, tps[0], tps[1], tps[1]/tps[0], tps[2], tps[3], tps[3]/tps[2])
	}
	fmt.Fprintln(w)
	return nil
}

// setupSecurity makes the tables, the group readers_writers with SELECT
// and INSERT on them, and the role bench, a member of it.
func setupSecurity(ctx context.Context, dsn string, rows int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, sql := range []string{
		secDDL, secLogDDL,
		"CREATE ROLE readers_writers",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE readers_writers", benchRole, benchPassword),
		"GRANT SELECT ON secbench TO readers_writers",
		"GRANT INSERT ON seclog TO readers_writers",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	data := make([][]any, rows)
	for i := range data {
		data[i] = []any{int32(i + 1), fmt.Sprintf("value-%d", i+1)}
	}
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"secbench"}, []string{"id", "v"}, pgx.CopyFromRows(data))
	return err
}

// connectionRate opens and closes connections (with one query each, so the
// session really started) from clients goroutines for d, and returns the
// rate.
func connectionRate(ctx context.Context, dsn string, clients int, d time.Duration) (float64, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return 0, err
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(d)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				conn, err := pgx.ConnectConfig(ctx, cfg)
				if err == nil {
					var one int
					err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
					conn.Close(ctx)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if n.Load() == 0 {
		return 0, errors.New("no connection in the whole run")
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// selfSignedCert returns a certificate for 127.0.0.1 and localhost, and its
// key, from a CA of its own.
func selfSignedCert() (certPEM, keyPEM []byte, err error) {
	ca, err := testpki.NewCA("bench CA")
	if err != nil {
		return nil, nil, err
	}
	return ca.Issue("localhost", 2, []string{"localhost"}, "127.0.0.1")
}
