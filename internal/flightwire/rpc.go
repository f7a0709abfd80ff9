package flightwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// MaxMessageBytes is the largest gRPC message mink's clients and server
// accept.
const MaxMessageBytes = 256 << 20

// DialOptions are the gRPC options mink uses to reach a Flight service:
// plaintext (listeners are loopback or a private network), and messages up
// to MaxMessageBytes. Bulk transfers want large socket buffers and flow
// control windows (ServerOptions has the server's side): gRPC's defaults
// (32 KiB buffers, 64 KiB windows grown by probing) cost about 11% more
// CPU per row read on loopback. The codec is Codec, which decodes DoGet's
// messages without copying their bodies.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes),
			grpc.ForceCodecV2(Codec{})),
		grpc.WithReadBufferSize(1 << 20), grpc.WithWriteBufferSize(1 << 20),
		grpc.WithInitialWindowSize(16 << 20), grpc.WithInitialConnWindowSize(64 << 20),
	}
}

// ServerOptions are the gRPC server options of mink's Flight service, the
// counterpart of DialOptions. Its codec is Codec, with which the service
// sends DoGet's messages as DataMessages.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(Codec{}),
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ReadBufferSize(1 << 20), grpc.WriteBufferSize(1 << 20),
		grpc.InitialWindowSize(16 << 20), grpc.InitialConnWindowSize(64 << 20),
	}
}

// PutBatches writes recs, which share one schema, to the descriptor's
// table or bucket in one DoPut, and returns the acknowledgements received.
// A bucket-addressed DoPut acknowledges each batch once durable, in order:
// on error, the acknowledged batches are durable, and RetryableWrite says
// whether the others certainly are not.
func PutBatches(ctx context.Context, c flight.FlightServiceClient, desc *flight.FlightDescriptor, recs []arrow.RecordBatch) (acks []PutAck, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// gRPC opens the stream only on a ready connection (or fails): an error
	// here means the server saw nothing.
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, &notSentError{err}
	}
	type result struct {
		acks []PutAck
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for {
			res, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.err = err
				break
			}
			var ack PutAck
			if len(res.GetAppMetadata()) > 0 {
				if err := json.Unmarshal(res.GetAppMetadata(), &ack); err != nil {
					r.err = fmt.Errorf("put ack: %w", err)
					break
				}
			}
			r.acks = append(r.acks, ack)
		}
		done <- r
	}()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(recs[0].Schema()), ipc.WithAllocator(memory.DefaultAllocator))
	w.SetFlightDescriptor(desc)
	var sendErr error
	for _, rec := range recs {
		if sendErr = w.Write(rec); sendErr != nil {
			break
		}
	}
	if sendErr == nil {
		sendErr = w.Close()
	}
	if sendErr == nil {
		sendErr = stream.CloseSend()
	}
	if sendErr != nil && !errors.Is(sendErr, io.EOF) {
		// A local failure (encoding): stop the call.
		cancel()
		r := <-done
		return r.acks, sendErr
	}
	// io.EOF on send means the server ended the call: Recv has its status.
	r := <-done
	return r.acks, r.err
}

// notSentError is an error of a call that never reached the server.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// NotSent reports whether err is from a call that never reached the server
// (it could not connect), so that nothing of it was done.
func NotSent(err error) bool {
	var e *notSentError
	return errors.As(err, &e)
}

// GetStream reads a DoGet stream, calling fn with every record (valid only
// during the call) and its BatchMeta. The schema is passed to fn's first
// call, and to onSchema before any record.
func GetStream(ctx context.Context, c flight.FlightServiceClient, ticket []byte, onSchema func(*arrow.Schema), fn func(rec arrow.RecordBatch, meta BatchMeta) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		return err
	}
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return unwrapIPC(err)
	}
	defer rdr.Release()
	if onSchema != nil {
		onSchema(rdr.Schema())
	}
	for rdr.Next() {
		var meta BatchMeta
		if md := rdr.LatestAppMetadata(); len(md) > 0 {
			if err := json.Unmarshal(md, &meta); err != nil {
				return fmt.Errorf("batch metadata: %w", err)
			}
		}
		if err := fn(rdr.RecordBatch(), meta); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return unwrapIPC(err)
	}
	return nil
}

// unwrapIPC returns the gRPC status inside an ipc reader's error, so that
// callers can act on its code and details.
func unwrapIPC(err error) error {
	var se interface {
		error
		GRPCStatus() *status.Status
	}
	if errors.As(err, &se) {
		return se
	}
	return err
}

// DoAction runs an action with a JSON body and decodes its single JSON
// result into out (nil: ignore).
//
// An error for which NotSent holds means the server never saw the action:
// DoAction is a server-streaming call, and gRPC reports a failure to open
// the stream (no ready connection, the context ending while it waits for
// one) from the call itself, before the request is written, while every
// failure after the request may have been written (a connection that
// breaks) comes from the stream's Recv.
func DoAction(ctx context.Context, c flight.FlightServiceClient, typ string, body, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return fmt.Errorf("action %s: %w", typ, err)
		}
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: typ, Body: b})
	if err != nil {
		return &notSentError{err}
	}
	var got []byte
	for {
		res, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		got = append(got, res.GetBody()...)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(got, out); err != nil {
		return fmt.Errorf("action %s result: %w", typ, err)
	}
	return nil
}
