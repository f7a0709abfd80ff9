package auth

import (
	"crypto/sha256"
	"encoding/base64"
)

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func b64decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

func b64encode(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
