package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Store is a flat namespace of immutable objects addressed by key.
//
// Keys are slash-separated relative paths such as "wal/3/7/00000012"; see
// ValidateKey. Objects are never overwritten: the only write is the
// create-only PutIfAbsent, and an object changes only by being deleted.
//
// All methods are safe for concurrent use. Errors wrap the sentinel errors
// below, so callers test them with errors.Is.
type Store interface {
	// Get returns the whole object. It returns ErrNotFound if the key does
	// not exist. A reader never sees a partially written object.
	Get(ctx context.Context, key string) ([]byte, error)

	// GetRange returns the bytes [off, off+n) of the object, clipped at its
	// end. n < 0 means "to the end". off == size returns an empty slice and
	// no error (reading at end of object, including any read of an empty
	// object); off > size or off < 0 returns ErrInvalidRange. A missing key
	// returns ErrNotFound.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)

	// PutIfAbsent creates the object with the given content if and only if
	// the key does not exist; otherwise it returns ErrExists and leaves the
	// existing object unchanged. Of any number of concurrent puts of one
	// key, exactly one succeeds.
	//
	// When PutIfAbsent returns nil the object is durable (on Dir: fsynced,
	// including its directory entry).
	//
	// ErrExists does not prove that another writer won: if an earlier
	// attempt of the same call succeeded but its response was lost (a
	// timeout, a reset connection, an SDK retry), the retry sees the
	// writer's own object. A caller that must know whether it won reads the
	// object back and compares the content. Any other error leaves the
	// outcome unknown: the object may or may not have been created.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// List returns the objects whose key starts with prefix, sorted by key.
	// The prefix is a plain string prefix, not a directory: "wal/1/1/000"
	// matches "wal/1/1/0001". The empty prefix lists every object. A list
	// that runs concurrently with puts and deletes may or may not include
	// the objects they touch.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// Delete removes the object. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error

	// Close releases the store's resources. The store must not be used
	// afterwards.
	Close() error
}

// ObjectInfo describes one object returned by List.
type ObjectInfo struct {
	Key  string
	Size int64
}

var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: a create-only put found the key already present.
	ErrExists = errors.New("object already exists")
	// ErrInvalidRange: a range read started before 0 or past the end of the
	// object.
	ErrInvalidRange = errors.New("invalid range")
	// ErrInvalidKey: the key or list prefix is malformed (see ValidateKey),
	// or is reserved by the backend.
	ErrInvalidKey = errors.New("invalid object key")
)

// ValidateKey reports whether key is a well-formed object key: non-empty, no
// NUL byte, not starting with '/', and made of non-empty segments none of
// which is "." or "..". These rules make a key map to the same object on
// every backend (a local directory would fold "a//b" into "a/b" and resolve
// "..") and keep a key inside its store. The error wraps ErrInvalidKey.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: %q contains NUL", ErrInvalidKey, key)
	}
	if key[0] == '/' {
		return fmt.Errorf("%w: %q starts with '/'", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty path segment", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

// ValidatePrefix reports whether prefix is a well-formed List prefix: empty,
// or a string every complete segment of which (everything up to the last
// '/') obeys the key rules. The last, partial segment may be anything
// without NUL, because it only has to be a prefix of a valid segment: "wal/0"
// and "wal/." are valid prefixes. The error wraps ErrInvalidKey.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.IndexByte(prefix, 0) >= 0 {
		return fmt.Errorf("%w: prefix %q contains NUL", ErrInvalidKey, prefix)
	}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := ValidateKey(prefix[:i]); err != nil {
			return fmt.Errorf("prefix %q: %w", prefix, err)
		}
	}
	return nil
}

// Options configures Open. Zero values mean "use the default".
type Options struct {
	// S3Endpoint is the base URL of an S3-compatible service, for example
	// "http://127.0.0.1:7070". If empty, AWS_ENDPOINT_URL_S3 and then
	// AWS_ENDPOINT_URL are used, and if those are unset too, AWS S3 itself.
	S3Endpoint string
	// S3Region defaults to the AWS config's region (AWS_REGION), then
	// "us-east-1".
	S3Region string
	// S3AccessKey and S3SecretKey are static credentials. If empty, the
	// usual AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// shared config files, ...) is used.
	S3AccessKey string
	S3SecretKey string
	// S3MaxAttempts bounds the SDK's attempts per request (default 3).
	S3MaxAttempts int
}

// Open returns the Store named by rawURL:
//
//	file:///abs/path      a local directory (NewDir), created if missing
//	s3://bucket[/prefix]  an S3 bucket, optionally under a key prefix (NewS3)
//
// Anything else is an error.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	const usage = `want "file:///abs/path" or "s3://bucket/prefix"`
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("objstore: open %q: %s", rawURL, usage)
	}
	switch u.Scheme {
	case "file":
		if u.Opaque != "" || u.Host != "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("objstore: open %q: file URL needs an absolute path: %s", rawURL, usage)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("objstore: open %q: unexpected query or fragment: %s", rawURL, usage)
		}
		return NewDir(u.Path)
	case "s3":
		if u.Opaque != "" || u.Host == "" {
			return nil, fmt.Errorf("objstore: open %q: missing bucket: %s", rawURL, usage)
		}
		if u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("objstore: open %q: unexpected user, port, query or fragment: %s", rawURL, usage)
		}
		cfg := S3Config{
			Bucket:      u.Host,
			Prefix:      strings.Trim(u.Path, "/"),
			Endpoint:    opts.S3Endpoint,
			Region:      opts.S3Region,
			AccessKey:   opts.S3AccessKey,
			SecretKey:   opts.S3SecretKey,
			MaxAttempts: opts.S3MaxAttempts,
		}
		if cfg.Endpoint == "" {
			cfg.Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
		}
		if cfg.Endpoint == "" {
			cfg.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
		}
		return NewS3(ctx, cfg)
	case "":
		return nil, fmt.Errorf("objstore: open %q: missing scheme: %s", rawURL, usage)
	default:
		return nil, fmt.Errorf("objstore: open %q: unsupported scheme %q: %s", rawURL, u.Scheme, usage)
	}
}
