package icebergrest

import (
	"encoding/json"
	"net/http"
)

// Iceberg's error types (the ErrorModel's "type"), which clients map to
// their own exceptions (NoSuchTableException, …) by type and status code.
const (
	typeBadRequest      = "BadRequestException"
	typeNotAuthorized   = "NotAuthorizedException"
	typeForbidden       = "ForbiddenException"
	typeNoSuchNamespace = "NoSuchNamespaceException"
	typeNoSuchTable     = "NoSuchTableException"
	typeNotFound        = "NotFoundException"
	typeTooManyRequests = "TooManyRequestsException"
	typeUnavailable     = "ServiceUnavailableException"
	typeServerError     = "InternalServerError"
)

// readOnlyMessage is the message of every refused write.
const readOnlyMessage = "the mink lake catalog is read-only: mink is the only writer of its lake; " +
	"create, change and drop tables through mink's SQL (the PostgreSQL protocol), and they appear here once tiered"

// errorModel is the Iceberg REST ErrorModel, wrapped in {"error": …}.
type errorModel struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// writeError answers an ErrorModel. A HEAD request gets the status alone.
func writeError(w http.ResponseWriter, r *http.Request, code int, typ, message string) {
	if r.Method == http.MethodHead {
		w.WriteHeader(code)
		return
	}
	writeJSON(w, code, map[string]errorModel{"error": {Message: message, Type: typ, Code: code}})
}
