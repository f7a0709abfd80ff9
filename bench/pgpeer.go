package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned by StartPostgres when no PostgreSQL server
// binaries are installed. Benchmarks report the peer as not measured, with
// the reason, rather than failing.
var ErrNoPostgres = errors.New("PostgreSQL server is not installed (Debian: apt-get install -y postgresql)")

// Postgres is a PostgreSQL server started for a benchmark run: a fresh
// cluster (initdb) with default settings, fsync on, listening on a free
// loopback port, no Unix socket.
type Postgres struct {
	// DSN is a libpq connection string for the superuser "postgres" on the
	// database "postgres".
	DSN string
	// Version is the server's version string, e.g. "15.18".
	Version string
	// Major is the major version of the binaries, e.g. "15".
	Major string

	dataDir string
	binDir  string
	port    int
	cred    *syscall.Credential
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// postgresBinDir finds the server binaries: Debian's
// /usr/lib/postgresql/<major>/bin, preferring 15 (the peer the benchmarks
// name), else the newest installed.
func postgresBinDir() (dir, major string, err error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	var majors []int
	for _, m := range matches {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if err == nil {
			if _, err := os.Stat(filepath.Join(filepath.Dir(m), "initdb")); err == nil {
				majors = append(majors, v)
			}
		}
	}
	if len(majors) == 0 {
		return "", "", ErrNoPostgres
	}
	sort.Ints(majors)
	pick := majors[len(majors)-1]
	for _, v := range majors {
		if v == 15 {
			pick = v
		}
	}
	major = strconv.Itoa(pick)
	return filepath.Join("/usr/lib/postgresql", major, "bin"), major, nil
}

// StartPostgres initialises a PostgreSQL cluster in a new directory under
// dir (default: the temp dir) and starts its server. Stop shuts it down and
// removes the directory. It returns ErrNoPostgres when the server is not
// installed.
//
// PostgreSQL refuses to run as root: when this process is root, initdb and
// postgres run as the "postgres" user (the same as `runuser -u postgres`),
// the cluster directory is owned by that user, and dir must be searchable
// by it.
func StartPostgres(ctx context.Context, dir string) (*Postgres, error) {
	return StartPostgresWith(ctx, dir, PostgresOptions{})
}

// PostgresOptions set up a peer the way a secured mink is set up.
type PostgresOptions struct {
	// TLSCert and TLSKey (PEM), when set, turn ssl on.
	TLSCert, TLSKey []byte
	// HBA, when set, replaces pg_hba.conf. The harness connects as
	// postgres over plain TCP from 127.0.0.1, so keep a rule for that.
	HBA string
}

// StartPostgresWith is StartPostgres with TLS and host rules.
func StartPostgresWith(ctx context.Context, dir string, opts PostgresOptions) (*Postgres, error) {
	binDir, major, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = os.TempDir()
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := checkSearchable(dir); err != nil {
			return nil, err
		}
	}
	base, err := os.MkdirTemp(dir, "mink-bench-postgres-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{Major: major, dataDir: filepath.Join(base, "data"), exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(base)
		}
	}()
	if err := os.Mkdir(p.dataDir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, d := range []string{base, p.dataDir} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	// --no-sync only skips flushing initdb's own files; the server runs
	// with fsync on.
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", p.dataDir,
		"-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	initdb.Dir = base
	initdb.Env = postgresEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}

	if err := configurePostgres(p.dataDir, cred, opts); err != nil {
		return nil, err
	}
	if p.port, err = freeLoopbackPort(); err != nil {
		return nil, err
	}
	p.binDir, p.cred = binDir, cred
	if err := p.start(); err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			p.shutdown()
		}
	}()
	p.DSN = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", p.port)
	if err := p.waitReady(ctx, time.Minute); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// start starts the postmaster on the cluster's data directory and port,
// its output appended to postgres.log; it returns without waiting for it to
// accept connections.
func (p *Postgres) start() error {
	base := filepath.Dir(p.dataDir)
	logFile, err := os.OpenFile(filepath.Join(base, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	p.exited = make(chan struct{})
	p.cmd = exec.Command(filepath.Join(p.binDir, "postgres"), "-D", p.dataDir, "-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=")
	p.cmd.Dir = base
	p.cmd.Env = postgresEnv()
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	cmd, exited := p.cmd, p.exited
	go func() {
		p.waitErr = cmd.Wait()
		close(exited)
	}()
	return nil
}

// waitReady polls until the server accepts a connection, and records its
// version.
func (p *Postgres) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := pgx.Connect(ctx, p.DSN)
		if err == nil {
			err = conn.QueryRow(ctx, "SHOW server_version").Scan(&p.Version)
			conn.Close(ctx)
			if err != nil {
				return fmt.Errorf("postgres version: %w", err)
			}
			return nil
		}
		select {
		case <-p.exited:
			log, _ := os.ReadFile(filepath.Join(filepath.Dir(p.dataDir), "postgres.log"))
			return fmt.Errorf("postgres exited at start (%v):\n%s", p.waitErr, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %v: %w", timeout, err)
		}
	}
}

// Halt stops the server the way `pg_ctl stop -m <mode>` does, keeping its
// directory for Restart: "fast" (SIGINT: backends end, then the shutdown
// checkpoint) or "immediate" (SIGQUIT: no checkpoint, so the next start
// replays the WAL since the last one, as after a crash).
func (p *Postgres) Halt(mode string) error {
	sig := syscall.SIGINT
	switch mode {
	case "fast":
	case "immediate":
		sig = syscall.SIGQUIT
	default:
		return fmt.Errorf("stop mode %q: want fast or immediate", mode)
	}
	return p.stop(sig, 5*time.Minute, "stop ("+mode+")")
}

// Restart starts a halted server again on the same directory and port; it
// returns when the postmaster was started, before it accepts connections
// (after an immediate stop it replays the WAL first).
func (p *Postgres) Restart() error {
	select {
	case <-p.exited:
	default:
		return errors.New("postgres is running: Halt it first")
	}
	return p.start()
}

// configurePostgres writes the TLS files and host rules of opts into a
// fresh cluster's data directory, owned by the server's user.
func configurePostgres(dataDir string, cred *syscall.Credential, opts PostgresOptions) error {
	var files []string
	write := func(name string, data []byte, mode os.FileMode) error {
		path := filepath.Join(dataDir, name)
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
		files = append(files, path)
		return nil
	}
	if opts.TLSCert != nil {
		if err := write("server.crt", opts.TLSCert, 0o644); err != nil {
			return err
		}
		if err := write("server.key", opts.TLSKey, 0o600); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\npassword_encryption = 'scram-sha-256'\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if opts.HBA != "" {
		if err := write("pg_hba.conf", []byte(opts.HBA), 0o600); err != nil {
			return err
		}
	}
	if cred != nil {
		for _, f := range files {
			if err := os.Chown(f, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop shuts the server down (fast shutdown: SIGINT) and removes its
// directory.
func (p *Postgres) Stop() error {
	err := p.shutdown()
	if rmErr := os.RemoveAll(filepath.Dir(p.dataDir)); err == nil {
		err = rmErr
	}
	return err
}

func (p *Postgres) shutdown() error { return p.stop(syscall.SIGINT, 30*time.Second, "shut down") }

// stop sends the server sig and waits up to wait for it to exit, then
// kills its process group (its backends are in it).
func (p *Postgres) stop(sig syscall.Signal, wait time.Duration, what string) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(wait):
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return fmt.Errorf("postgres did not %s within %v; killed", what, wait)
}

// postgresCredential is who initdb and postgres run as: the "postgres"
// user when this process is root, else this process's user (nil).
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to: %w (the Debian package creates the postgres user)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// checkSearchable reports an error when the postgres user could not reach
// a directory under dir: every ancestor needs the x bit for others (the
// directories in question belong to root).
func checkSearchable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by the postgres user (mode %v); PostgreSQL's data directory must be under a directory it can reach: chmod o+x it or pick another directory", d, st.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// postgresEnv is a minimal environment: no PG* variables of ours leak
// into the server, and the C locale.
func postgresEnv() []string {
	env := []string{"LC_ALL=C", "LANG=C"}
	if path := os.Getenv("PATH"); path != "" {
		env = append(env, "PATH="+path)
	}
	return env
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// peerName is how the peer is named in tables.
func (p *Postgres) peerName() string {
	if p.Version == "" {
		return "PostgreSQL " + p.Major
	}
	v, _, _ := strings.Cut(p.Version, " ")
	return "PostgreSQL " + v
}
