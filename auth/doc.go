// Package auth holds what every listener of a node uses to authenticate a
// client, independent of its protocol: SCRAM-SHA-256 verifiers and the
// server side of the SCRAM exchange (Postgres, Kafka SASL/SCRAM), password
// checks (Kafka SASL/PLAIN, HTTP basic), signed bearer tokens (Arrow Flight,
// node to node), pg_hba-style rules and the limit on failed logins per
// source address.
//
// It is pure Go and knows nothing of the metadata log: roles and their
// verifiers live in package catalog, and a listener passes what it looked
// up.
package auth
