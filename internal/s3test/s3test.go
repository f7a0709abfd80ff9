// Package s3test runs a real S3 server, versitygw with its posix backend,
// on a loopback port for tests and benchmarks.
//
// Each Server is one versitygw child process serving one temp directory.
// The process is the only thing this package starts; Stop (registered with
// t.Cleanup by Start) terminates it and waits for it. A Server's fields are
// read-only after start and safe to read from any goroutine.
//
// The binary is looked up on PATH, then in $GOPATH/bin. Install it with
// scripts/install-versitygw.sh. Setting MINK_SKIP_S3=1 makes Start skip the
// calling test instead of running the server.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// Version is the versitygw release this package is tested with;
	// scripts/install-versitygw.sh installs it.
	Version = "v1.8.0"

	// SkipEnv names the variable that, set to 1, skips S3 tests.
	SkipEnv = "MINK_SKIP_S3"

	// DefaultBucket is the bucket every Server creates.
	DefaultBucket = "mink-test"

	region = "us-east-1"

	// emptySHA256 is the hex SHA-256 of an empty payload, for signing.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// ErrNotInstalled is returned by StartProcess when no versitygw binary is
// found.
var ErrNotInstalled = errors.New("versitygw not found on PATH or in $GOPATH/bin; run scripts/install-versitygw.sh")

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:PORT".
	Endpoint string
	// Bucket exists and is empty at start.
	Bucket string
	// AccessKey and SecretKey are the root account's credentials.
	AccessKey string
	SecretKey string
	// Region is the region the server expects in signatures.
	Region string
	// Version is the versitygw release running, if known (BinaryVersion).
	Version string
	// Dir is the server's posix root: the bucket is the directory
	// Dir/Bucket and object "a/b" is the file Dir/Bucket/a/b.
	Dir string

	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error         // set before exited is closed

	stopOnce sync.Once
}

// Start runs a versitygw for the test in a fresh temp directory and stops
// it when the test ends. A missing binary fails the test with instructions,
// unless MINK_SKIP_S3=1, which skips it.
func Start(t testing.TB) *Server {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("%s=1: skipping test that needs a versitygw S3 server", SkipEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := StartProcess(ctx, t.TempDir())
	if err != nil {
		if errors.Is(err, ErrNotInstalled) {
			t.Fatalf("s3test: %v (or set %s=1 to skip S3 tests)", err, SkipEnv)
		}
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartProcess runs a versitygw serving dir (which must exist) and returns
// once it answers requests. ctx bounds only the start; the process runs
// until Stop, which the caller must call.
func StartProcess(ctx context.Context, dir string) (*Server, error) {
	bin, err := FindBinary()
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	// In the posix backend a bucket is a directory under the root; making
	// it directly avoids a CreateBucket call (verified with v1.8.0, whose
	// root account can use such a bucket without further setup).
	if err := os.MkdirAll(filepath.Join(dataDir, DefaultBucket), 0o755); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	// The free port we pick can be taken before versitygw binds it; try
	// again with another one.
	var lastErr error
	for range 3 {
		s, err := startOnce(ctx, bin, dir, dataDir)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, bin, dir, dataDir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("s3test: pick a port: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Fresh credentials per server: readiness is a request signed with
	// them, so another server that grabbed the port cannot pass for ours.
	accessKey, secretKey := "mink"+randomHex(8), randomHex(20)
	logPath := filepath.Join(dir, fmt.Sprintf("versitygw-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	defer logFile.Close() // the child has its own copy

	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", dataDir)
	cmd.Env = append(os.Environ(),
		"ROOT_ACCESS_KEY="+accessKey,
		"ROOT_SECRET_KEY="+secretKey,
		"VGW_REGION="+region,
	)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group, so a Ctrl-C aimed at the test run does not race
	// with our orderly Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("s3test: start %s: %w", bin, err)
	}
	s := &Server{
		Endpoint:  "http://" + addr,
		Bucket:    DefaultBucket,
		AccessKey: accessKey,
		SecretKey: secretKey,
		Region:    region,
		Dir:       dataDir,
		Version:   BinaryVersion(bin),
		cmd:       cmd,
		logPath:   logPath,
		exited:    make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("s3test: versitygw on %s: %w\n%s", addr, err, s.logTail())
	}
	return s, nil
}

// waitReady polls until a HeadBucket signed with this server's credentials
// succeeds, which proves the process listening is ours and the bucket is
// usable.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, s.Endpoint+"/"+s.Bucket, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		if err := signer.SignHTTP(ctx, creds, req, emptySHA256, "s3", s.Region, time.Now()); err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HEAD bucket: %s", resp.Status)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before answering: %v", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	data, _ := os.ReadFile(s.logPath)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "versitygw log (" + s.logPath + "):\n" + string(bytes.TrimSpace(data))
}

// URL returns the objstore URL for prefix in the server's bucket,
// "s3://mink-test/prefix".
func (s *Server) URL(prefix string) string {
	return "s3://" + s.Bucket + "/" + strings.TrimPrefix(prefix, "/")
}

// Stop terminates the server (SIGTERM, then SIGKILL after 5 s) and waits
// for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

// FindBinary returns the path of the versitygw binary, looking on PATH and
// then in each $GOPATH/bin (GOPATH defaulting to ~/go). It prefers a binary
// built from Version, and otherwise returns the first one found.
func FindBinary() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("versitygw"); err == nil {
		candidates = append(candidates, p)
	}
	for _, gopath := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(gopath, "bin", "versitygw")
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return "", ErrNotInstalled
	}
	for _, p := range candidates {
		if BinaryVersion(p) == Version {
			return p, nil
		}
	}
	return candidates[0], nil
}

// BinaryVersion returns the module version a Go-built versitygw binary was
// built from ("v1.8.0"), or "" if unknown. versitygw --version prints "git"
// for binaries built with go install, so this reads the Go build info.
func BinaryVersion(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	if info.Main.Path == "github.com/versity/versitygw" {
		return info.Main.Version
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
