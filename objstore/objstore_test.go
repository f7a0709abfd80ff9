package objstore_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/objstore/objstoretest"
)

func TestDirConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		d, err := objstore.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func TestMemConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return objstore.NewMem() })
}

func TestFaultyConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		d, err := objstore.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return objstore.NewFaulty(d)
	})
}

func TestS3Conformance(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		// One server, a fresh prefix per subtest.
		return newS3(t, srv, fmt.Sprintf("conformance/%d", n.Add(1)))
	})
}

func newS3(t *testing.T, srv *s3test.Server, prefix string) *objstore.S3 {
	t.Helper()
	s, err := objstore.NewS3(t.Context(), objstore.S3Config{
		Bucket:    srv.Bucket,
		Prefix:    prefix,
		Endpoint:  srv.Endpoint,
		Region:    srv.Region,
		AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3Prefix checks that stores under different prefixes of one bucket do
// not see each other's objects, and that the prefix is where the objects
// land in the bucket.
func TestS3Prefix(t *testing.T) {
	srv := s3test.Start(t)
	ctx := t.Context()
	a := newS3(t, srv, "tenant/a")
	b := newS3(t, srv, "/tenant/b/")
	whole := newS3(t, srv, "")
	for _, s := range []objstore.Store{a, b, whole} {
		defer s.Close()
	}
	if err := a.PutIfAbsent(ctx, "k", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "k", []byte("from b")); err != nil {
		t.Fatalf("same key under another prefix: %v", err)
	}
	got, err := whole.List(ctx, "tenant/")
	if err != nil {
		t.Fatal(err)
	}
	want := []objstore.ObjectInfo{{Key: "tenant/a/k", Size: 6}, {Key: "tenant/b/k", Size: 6}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List of the whole bucket: got %v, want %v", got, want)
	}
	if infos, err := a.List(ctx, ""); err != nil || len(infos) != 1 || infos[0].Key != "k" {
		t.Fatalf("List under prefix a: got %v, %v; want [k]", infos, err)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir, srv.Bucket, "tenant", "a", "k")); err != nil {
		t.Fatalf("object not where the posix backend should keep it: %v", err)
	}
}

// TestKeyDirectoryCollision pins down what happens when a key is also the
// "directory" of other keys, which file-system backends (Dir, versitygw's
// posix) cannot represent: the put fails, and not with ErrExists, because
// no object has that key.
func TestKeyDirectoryCollision(t *testing.T) {
	stores := map[string]objstore.Store{}
	d, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stores["dir"] = d
	if os.Getenv(s3test.SkipEnv) != "1" {
		stores["versitygw"] = newS3(t, s3test.Start(t), "collide")
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			defer s.Close()
			if err := s.PutIfAbsent(ctx, "a/b", []byte("x")); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"a", "a/b/c"} {
				err := s.PutIfAbsent(ctx, key, []byte("y"))
				if err == nil || errors.Is(err, objstore.ErrExists) {
					t.Errorf("PutIfAbsent(%q) next to a/b: got %v, want a non-ErrExists error", key, err)
				}
				if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
					t.Errorf("Get(%q): got %v, want ErrNotFound", key, err)
				}
				if err := s.Delete(ctx, key); err != nil {
					t.Errorf("Delete(%q): %v", key, err)
				}
			}
			if got, err := s.Get(ctx, "a/b"); err != nil || string(got) != "x" {
				t.Errorf("Get(a/b): got %q, %v", got, err)
			}
		})
	}
}

func TestDirLayout(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	d, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutIfAbsent(ctx, "wal/1/2/0001", []byte("data")); err != nil {
		t.Fatal(err)
	}
	// The object is a plain file at its key's path.
	if got, err := os.ReadFile(filepath.Join(root, "wal", "1", "2", "0001")); err != nil || string(got) != "data" {
		t.Fatalf("object file: got %q, %v", got, err)
	}
	// No temp file is left behind, and the temp area is not an object.
	tmp, err := os.ReadDir(filepath.Join(root, ".objstore-tmp"))
	if err != nil || len(tmp) != 0 {
		t.Fatalf("temp dir after put: %v, %v; want empty", tmp, err)
	}
	if err := os.WriteFile(filepath.Join(root, ".objstore-tmp", "put-stale"), []byte("crash leftover"), 0o644); err != nil {
		t.Fatal(err)
	}
	if infos, err := d.List(ctx, ""); err != nil || len(infos) != 1 {
		t.Fatalf("List: got %v, %v; want only wal/1/2/0001", infos, err)
	}
	for _, key := range []string{".objstore-tmp", ".objstore-tmp/put-stale"} {
		if err := d.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q): got %v, want ErrInvalidKey", key, err)
		}
	}
	// Deleting the last object removes the directories it leaves empty.
	if err := d.Delete(ctx, "wal/1/2/0001"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "wal")); !os.IsNotExist(err) {
		t.Fatalf("wal/ after deleting its last object: %v, want it gone", err)
	}
	// A reopened store sees what the first one wrote.
	if err := d.PutIfAbsent(ctx, "keep/me", []byte("durable")); err != nil {
		t.Fatal(err)
	}
	d2, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d2.Get(ctx, "keep/me"); err != nil || string(got) != "durable" {
		t.Fatalf("Get from reopened store: %q, %v", got, err)
	}
}

// TestDirPutDeleteRace runs puts and deletes of sibling keys concurrently:
// a delete that empties a directory removes it, and a put into that
// directory must recreate it rather than fail.
func TestDirPutDeleteRace(t *testing.T) {
	ctx := t.Context()
	d, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("p/%d/q/%d-%d", i%3, w, i)
				if err := d.PutIfAbsent(ctx, key, []byte("v")); err != nil {
					t.Errorf("PutIfAbsent(%s): %v", key, err)
					return
				}
				if err := d.Delete(ctx, key); err != nil {
					t.Errorf("Delete(%s): %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if infos, err := d.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Fatalf("List after put/delete pairs: %v, %v; want nothing", infos, err)
	}
}

func TestOpen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := objstore.Open(ctx, "file://"+dir, objstore.Options{})
	if err != nil {
		t.Fatalf("Open(file://%s): %v", dir, err)
	}
	if d, ok := s.(*objstore.Dir); !ok || d.Root() != dir {
		t.Fatalf("Open(file://...): got %T %v, want *Dir at %s", s, s, dir)
	}
	s, err = objstore.Open(ctx, "s3://some-bucket/a/prefix", objstore.Options{S3Endpoint: "http://127.0.0.1:1", S3Region: "eu-west-1"})
	if err != nil {
		t.Fatalf("Open(s3://...): %v", err)
	}
	if _, ok := s.(*objstore.S3); !ok {
		t.Fatalf("Open(s3://...): got %T, want *S3", s)
	}
	s.Close()

	for _, bad := range []string{
		"",
		"garbage",
		"/abs/path/without/scheme",
		"file://relative/path",
		"file:relative",
		"file:///abs?x=1",
		"http://example.com/x",
		"s3://",
		"s3:///prefix",
		"s3:bucket",
		"s3://user@bucket/p",
		"s3://bucket:80/p",
		"s3://bucket/a//b",
		"s3://bucket/../up",
		"://",
		"file://%zz",
	} {
		_, err := objstore.Open(ctx, bad, objstore.Options{})
		if err == nil {
			t.Errorf("Open(%q): no error", bad)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "objstore: open") {
			t.Errorf("Open(%q): error %q is not one line starting with \"objstore: open\"", bad, msg)
		}
	}
}

// TestOpenS3Env opens a store from a URL with the endpoint and credentials
// taken from the standard AWS environment variables.
func TestOpenS3Env(t *testing.T) {
	srv := s3test.Start(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	ctx := t.Context()
	s, err := objstore.Open(ctx, srv.URL("via-env"), objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutIfAbsent(ctx, "x", []byte("env")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(srv.Dir, srv.Bucket, "via-env", "x")); err != nil || string(got) != "env" {
		t.Fatalf("object in the server's directory: %q, %v", got, err)
	}
	// The service-specific variable wins over the generic one.
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
	s2, err := objstore.Open(ctx, srv.URL("via-env"), objstore.Options{S3MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Get(ctx, "x"); err == nil {
		t.Fatal("Get through AWS_ENDPOINT_URL_S3=http://127.0.0.1:1 succeeded; the variable was ignored")
	}
}

func TestValidateKey(t *testing.T) {
	for _, key := range []string{"a", "a/b", "wal/1/2/3", "a.b", "..a", "a..", "a/.b/..c", "with space", "ü"} {
		if err := objstore.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q): %v", key, err)
		}
	}
	for _, prefix := range []string{"", "a", "a/", "wal/1/1/000", "wal/.", "wal/..", "a/b/"} {
		if err := objstore.ValidatePrefix(prefix); err != nil {
			t.Errorf("ValidatePrefix(%q): %v", prefix, err)
		}
	}
}

// TestS3RetriedPutAfterLostResponse pins down the behaviour documented on
// S3 and in docs/format/objstore.md: when a create-only put reaches the
// server and succeeds but the client never sees the answer, the SDK's
// retry finds the object and the put returns ErrExists for a write that
// was in fact the caller's own. A proxy between client and versitygw loses
// the first response, either as a 503 or as a reset connection.
func TestS3RetriedPutAfterLostResponse(t *testing.T) {
	srv := s3test.Start(t)
	for _, mode := range []string{"503", "reset"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			var sabotage atomic.Int32
			proxy := httptest.NewServer(lossyProxy(t, srv.Endpoint, mode, &sabotage))
			defer proxy.Close()
			s, err := objstore.NewS3(ctx, objstore.S3Config{
				Bucket: srv.Bucket, Prefix: "lost-" + mode, Endpoint: proxy.URL, Region: srv.Region,
				AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sabotage.Store(1)
			err = s.PutIfAbsent(ctx, "wal/1/1/0001", []byte("mine"))
			if !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("put whose first response was lost: got %v, want ErrExists from the retry", err)
			}
			if sabotage.Load() != 0 {
				t.Fatal("the proxy never lost a response")
			}
			got, err := s.Get(ctx, "wal/1/1/0001")
			if err != nil || string(got) != "mine" {
				t.Fatalf("Get: %q, %v; want the caller's own content", got, err)
			}
		})
	}
}

// lossyProxy forwards requests to endpoint unchanged (the Host header too,
// which the request signature covers). While *sabotage > 0, a PUT is
// forwarded and performed, and then its response is replaced by a 503 or
// by a reset connection.
func lossyProxy(t *testing.T, endpoint, mode string, sabotage *atomic.Int32) http.Handler {
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || sabotage.Add(-1) < 0 {
			sabotage.Store(0)
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("proxied put: %d %s", rec.Code, rec.Body)
		}
		if mode == "503" {
			http.Error(w, "lost", http.StatusServiceUnavailable)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetLinger(0) // close with RST
		}
		conn.Close()
	})
}
