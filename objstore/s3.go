package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// S3Config configures NewS3.
type S3Config struct {
	// Bucket must exist; NewS3 does not create it.
	Bucket string
	// Prefix, if set, is prepended (with a '/') to every key, so several
	// stores can share a bucket. It must itself be a valid key.
	Prefix string
	// Endpoint is the service's base URL ("http://127.0.0.1:7070"). Empty
	// means AWS S3 (or whatever the AWS config resolves). Requests always
	// use path-style addressing (http://host/bucket/key), which every
	// S3-compatible server supports.
	Endpoint string
	// Region defaults to the AWS config's region, then "us-east-1".
	Region string
	// AccessKey and SecretKey are static credentials; if empty the default
	// AWS credential chain is used.
	AccessKey string
	SecretKey string
	// MaxAttempts is the SDK's attempts per request, the first included
	// (default 3).
	MaxAttempts int
}

// S3 is a Store on an S3 bucket.
//
// Create-only puts send If-None-Match: *; the service answers 412
// PreconditionFailed if the key exists, which maps to ErrExists. AWS answers
// 409 ConditionalRequestConflict while a competing conditional write of the
// same key is still in flight; the client retries it like a throttling
// error, and a 409 that outlives the retries is also reported as ErrExists,
// since the competing write has almost certainly won.
//
// Retries and lost responses: requests use the SDK's standard retryer,
// which retries network errors and 5xx responses. If a put reached the
// service and created the object but its response was lost, the retry finds
// the object and fails with 412, so PutIfAbsent returns ErrExists for a
// write that in fact succeeded. The Store contract makes that the caller's
// problem to resolve (read the object back and compare); the store cannot
// tell the two cases apart.
type S3 struct {
	client    *s3.Client
	transport *http.Transport
	bucket    string
	prefix    string // "" or ends in '/'
	// endpoint and region are the ones the client uses ("" endpoint: AWS).
	endpoint string
	region   string
}

var _ Store = (*S3)(nil)

// NewS3 returns a Store on the bucket described by cfg. It does not contact
// the service.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: open s3: missing bucket")
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("objstore: open s3://%s/%s: prefix: %w", cfg.Bucket, cfg.Prefix, err)
		}
		prefix += "/"
	}

	var loadOpts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: open s3://%s: load AWS config: %w", cfg.Bucket, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	// The default of 2 idle connections per host makes concurrent requests
	// to one endpoint open and close connections constantly.
	transport.MaxIdleConns = 256
	transport.MaxIdleConnsPerHost = 256
	maxAttempts := cfg.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 3
	}

	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = true
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.HTTPClient = &http.Client{Transport: transport}
		o.Retryer = retry.AddWithErrorCodes(
			retry.NewStandard(func(so *retry.StandardOptions) { so.MaxAttempts = maxAttempts }),
			"ConditionalRequestConflict")
		// S3-compatible servers often return no checksum on a GET; the SDK
		// would log a warning per request.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &S3{client: client, transport: transport, bucket: cfg.Bucket, prefix: prefix,
		endpoint: cfg.Endpoint, region: awsCfg.Region}, nil
}

// Endpoint is the service's base URL the store uses, "" for AWS S3 itself.
// Requests use path-style addressing (bucket in the path), always.
func (s *S3) Endpoint() string { return s.endpoint }

// Region is the region requests are signed for.
func (s *S3) Region() string { return s.region }

func (s *S3) objectKey(key string) *string { return aws.String(s.prefix + key) }

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("objstore: get %q: %w", key, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: s.objectKey(key)})
	if err != nil {
		return nil, fmt.Errorf("objstore: get %s: %w", key, s3Err(err))
	}
	defer out.Body.Close()
	data, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("objstore: get %s: read body: %w", key, err)
	}
	return data, nil
}

// GetRange implements Store.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("objstore: get range %q: %w", key, err)
	}
	if off < 0 {
		return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w: negative offset", key, off, n, ErrInvalidRange)
	}
	// HTTP cannot express an empty range, and answers 416 for a range that
	// starts at the end of the object; both need the object's size.
	if n == 0 {
		return s.emptyRange(ctx, key, off, n)
	}
	rangeHeader := fmt.Sprintf("bytes=%d-", off)
	if n > 0 {
		rangeHeader = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &s.bucket, Key: s.objectKey(key), Range: &rangeHeader,
	})
	if err != nil {
		err = s3Err(err)
		if errors.Is(err, ErrInvalidRange) {
			return s.emptyRange(ctx, key, off, n)
		}
		return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w", key, off, n, err)
	}
	defer out.Body.Close()
	data, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s: read body: %w", key, err)
	}
	// A server may ignore Range and send the whole object with 200; cut
	// the range out of it ourselves.
	if out.ContentRange == nil {
		end, err := clipRange(off, n, int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w", key, off, n, err)
		}
		data = data[off:end:end]
	}
	return data, nil
}

// emptyRange answers a range read that HTTP could not: it returns an empty
// slice if off is within [0, size], else ErrInvalidRange or ErrNotFound.
func (s *S3) emptyRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: s.objectKey(key)})
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, s3Err(err))
	}
	size := aws.ToInt64(head.ContentLength)
	if _, err := clipRange(off, n, size); err != nil {
		return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w", key, off, n, err)
	}
	if off == size || n == 0 {
		return []byte{}, nil
	}
	// The object existed with off < size, yet the range was refused: it
	// must have been deleted and re-created in between, which the Store
	// contract does not allow. Report it rather than guess.
	return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w: refused by the server for an object of %d bytes", key, off, n, ErrInvalidRange, size)
}

func readBody(body io.Reader, contentLength *int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := aws.ToInt64(contentLength); n > 0 {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PutIfAbsent implements Store. See the S3 type comment for how retries
// interact with create-only puts.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("objstore: put %q: %w", key, err)
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           s.objectKey(key),
		Body:          bytes.NewReader(data), // seekable, so the SDK can resend it on retry
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
	})
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, s3PutErr(err))
	}
	return nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("objstore: list %q: %w", prefix, s3Err(err))
		}
		for _, obj := range page.Contents {
			key := strings.TrimPrefix(aws.ToString(obj.Key), s.prefix)
			// Skip what no PutIfAbsent could have written, such as the
			// "dir/" markers some tools create.
			if ValidateKey(key) != nil {
				continue
			}
			out = append(out, ObjectInfo{Key: key, Size: aws.ToInt64(obj.Size)})
		}
	}
	// S3 returns keys in UTF-8 binary order, but not every compatible
	// server does.
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("objstore: delete %q: %w", key, err)
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.objectKey(key)})
	if err != nil {
		err = s3Err(err)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return nil
}

// Close implements Store.
func (s *S3) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// s3Err maps the errors of reads and deletes onto the package's sentinels,
// keeping the original error in the chain.
func s3Err(err error) error {
	code, status := s3ErrCode(err)
	switch {
	case code == "NoSuchKey" || code == "NotFound" || (status == http.StatusNotFound && code != "NoSuchBucket"):
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w (%w)", ErrInvalidRange, err)
	}
	return err
}

// s3PutErr maps the errors of a conditional PutObject: 412 means the key
// exists, and so (after the retries) does 409 ConditionalRequestConflict;
// see the S3 type comment.
func s3PutErr(err error) error {
	code, status := s3ErrCode(err)
	// Only this 409 code: versitygw, for one, also answers 409 with
	// ExistingObjectIsDirectory and ObjectParentIsFile when "a" and "a/b"
	// collide on its file system, and no object has the key then.
	if code == "PreconditionFailed" || code == "ConditionalRequestConflict" ||
		status == http.StatusPreconditionFailed {
		return fmt.Errorf("%w (%w)", ErrExists, err)
	}
	return err
}

func s3ErrCode(err error) (code string, status int) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return code, status
}
