package flightsvc

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
)

// Authentication (docs/security.md, "Arrow Flight authentication").
//
// A client calls Handshake with "authorization: Basic base64(user:pass)"
// (arrow-go's AuthenticateBasicToken, pyarrow's authenticate_basic_token)
// and gets "authorization: Bearer <token>" back, in the response headers
// and trailers (and as the payload of a HandshakeResponse to a client that
// sent a HandshakeRequest). Every other call sends
// that header; the interceptors below check it before any handler runs,
// so a refused call has done nothing (clients may retry it after a new
// handshake, writes included). The token is signed with the cluster key,
// so every node accepts every node's tokens; a node forwarding a request
// sends a short-lived token for the caller's role (Pool), and the node
// that receives it checks that role's privileges again.
//
// In trust mode (no --superuser-password-file) a call without a token acts
// as the bootstrap superuser; a call with a token acts as its role.

const (
	authHeader       = "authorization"
	handshakeMethod  = "/arrow.flight.protocol.FlightService/Handshake"
	bearerPrefix     = "Bearer"
	basicPrefix      = "Basic"
	msgNoCredentials = "authentication required: call Handshake with authorization: Basic base64(user:password), then send authorization: Bearer <token> with every call"
	msgBadToken      = "invalid or expired bearer token: authenticate again with a Flight handshake"
	msgNotBearer     = "calls other than Handshake take authorization: Bearer <token> from a Flight handshake"
	msgLoginFailed   = "authentication failed"
)

// forwardedKey marks a context whose identity came from a token another
// node made to forward a request (auth.Claims.Forwarded).
type forwardedKey struct{}

// unaryAuth authenticates a unary call (GetFlightInfo, GetSchema, …).
func (s *Service) unaryAuth(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// streamAuth authenticates a streaming call. Handshake authenticates
// itself.
func (s *Service) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod == handshakeMethod {
		return handler(srv, ss)
	}
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, &authStream{ServerStream: ss, ctx: ctx})
}

// authStream is a server stream whose context carries the caller.
type authStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a *authStream) Context() context.Context { return a.ctx }

// authenticate returns ctx carrying the identity of the call's bearer
// token (access.FromContext), or an Unauthenticated status. Without a
// Guard (Config.Access nil) every call passes without an identity.
func (s *Service) authenticate(ctx context.Context) (context.Context, error) {
	g := s.cfg.Access
	if g == nil {
		return ctx, nil
	}
	scheme, credential, ok := authorization(ctx)
	if !ok {
		if g.Trust() {
			return access.NewContext(ctx, s.bootstrapIdentity()), nil
		}
		return nil, status.Error(codes.Unauthenticated, msgNoCredentials)
	}
	if !strings.EqualFold(scheme, bearerPrefix) {
		return nil, status.Error(codes.Unauthenticated, msgNotBearer)
	}
	id, err := g.Token(credential)
	if err != nil {
		// The reason (forged, expired, role dropped) stays in the log.
		s.cfg.Logger.Debug("flight: bearer token refused", "addr", peerAddr(ctx), "err", err)
		return nil, status.Error(codes.Unauthenticated, msgBadToken)
	}
	if s.forwardedToken(credential) {
		ctx = context.WithValue(ctx, forwardedKey{}, true)
	}
	return access.NewContext(ctx, id), nil
}

// bootstrapIdentity is who a call without credentials acts as in trust
// mode: the bootstrap superuser.
func (s *Service) bootstrapIdentity() access.Identity {
	id := access.Identity{Role: catalog.BootstrapRole, Name: "mink"}
	s.cfg.Meta.Read(func(v *catalog.View) {
		if r, ok := v.Roles[catalog.BootstrapRole]; ok {
			id.Name = r.Name
		}
	})
	return id
}

// forwardedToken reports whether a token (that Guard.Token accepted) is
// one a node made to forward a request.
func (s *Service) forwardedToken(token string) bool {
	var key []byte
	s.cfg.Meta.Read(func(v *catalog.View) { key = v.ClusterKey })
	c, err := auth.VerifyToken(key, token, time.Now())
	return err == nil && c.Forwarded
}

// authorization splits the call's authorization header into its scheme
// and credential (HTTP's "scheme SP credential").
func authorization(ctx context.Context) (scheme, credential string, ok bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(authHeader)
	if len(vals) == 0 {
		return "", "", false
	}
	scheme, credential, _ = strings.Cut(strings.TrimSpace(vals[0]), " ")
	credential = strings.TrimLeft(credential, " ")
	return scheme, credential, scheme != ""
}

func peerNetAddr(ctx context.Context) net.Addr {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr
	}
	return nil
}

func peerAddr(ctx context.Context) string {
	if a := peerNetAddr(ctx); a != nil {
		return a.String()
	}
	return ""
}

// Handshake is Flight's basic-auth handshake: it checks the user and
// password of "authorization: Basic …" and answers with "authorization:
// Bearer <token>" in the response headers and trailers (arrow-go's and
// pyarrow's clients look in one or the other).
//
// The messages follow the client: to a client that sends no request
// message (arrow-go, pyarrow) it sends none, since arrow-go reads the
// trailers after its first Recv, which must then be the end of the
// stream; to one that sends a HandshakeRequest (arrow-rs's
// FlightClient::handshake, which returns only the payload) it answers with
// one HandshakeResponse whose payload is the token. In trust mode a
// handshake without credentials succeeds without a token.
func (s *Service) Handshake(stream flight.FlightService_HandshakeServer) error {
	ctx := stream.Context()
	_, err := stream.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	request := err == nil
	token, err := s.handshakeToken(ctx)
	if err != nil {
		return err
	}
	if token != "" {
		md := metadata.Pairs(authHeader, bearerPrefix+" "+token)
		if err := stream.SendHeader(md); err != nil {
			return err
		}
		stream.SetTrailer(md)
	}
	if request {
		return stream.Send(&flight.HandshakeResponse{Payload: []byte(token)})
	}
	return nil
}

// handshakeToken checks a handshake's credentials and returns the bearer
// token for them ("" in trust mode without credentials).
func (s *Service) handshakeToken(ctx context.Context) (string, error) {
	g := s.cfg.Access
	if g == nil {
		return "", nil
	}
	scheme, credential, ok := authorization(ctx)
	if !ok && g.Trust() {
		return "", nil
	}
	if !ok || !strings.EqualFold(scheme, basicPrefix) {
		return "", status.Error(codes.Unauthenticated, "Handshake takes authorization: Basic base64(user:password)")
	}
	user, password, ok := decodeBasic(credential)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "Handshake takes authorization: Basic base64(user:password)")
	}
	id, err := g.Password(access.Login{Listener: "flight", User: user, Addr: peerNetAddr(ctx)}, password)
	switch {
	case errors.Is(err, access.ErrTooManyFailures):
		return "", status.Error(codes.Unauthenticated, err.Error())
	case err != nil:
		return "", status.Error(codes.Unauthenticated, msgLoginFailed)
	}
	token, err := g.IssueToken(id)
	if err != nil {
		s.cfg.Logger.Error("flight: issue a bearer token", "role", id.Name, "err", err)
		return "", status.Error(codes.Unavailable, "cannot issue a token now; try again")
	}
	return token, nil
}

// decodeBasic decodes the credential of HTTP basic auth: base64 (padded
// or not) of "user:password".
func decodeBasic(credential string) (user, password string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(credential)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(credential); err != nil {
			return "", "", false
		}
	}
	user, password, ok = strings.Cut(string(raw), ":")
	return user, password, ok && user != ""
}
