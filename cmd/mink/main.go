// Command mink is the one mink binary: the server and the operator CLI.
// It only wires things up: flags, the config file and signals become a
// server.Config or an admin API call. See docs/cli.md.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minkdb/mink/server"
)

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "mink: "+err.Error())
		os.Exit(exitCode(err))
	}
}

// usageError marks errors caused by how mink was invoked (exit status 2).
type usageError struct{ error }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mink",
		Short:         "mink is a lakehouse table service with a PostgreSQL front door",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%v (see '%s --help')", err, cmd.CommandPath())}
	})
	root.AddCommand(newServerCmd(), newClusterCmd(), newTableCmd(), newTieringCmd(), newVersionCmd())
	return root
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the mink version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "mink "+version)
		},
	}
}

// adminFlags are the flags of every command that calls the admin API.
type adminFlags struct {
	server string
	caFile string
}

func (a *adminFlags) register(f *pflag.FlagSet) {
	f.StringVar(&a.server, "server", defaultAdminServer, "admin address of any mink node: HOST:PORT, http://HOST:PORT or https://HOST:PORT")
	f.StringVar(&a.caFile, "ca-file", "", "PEM CA bundle that verifies the node's certificate; implies https (a node started with --tls-cert-file)")
}

// client is the admin client the flags describe: HTTPS when --ca-file is
// given or --server starts with https:// (without --ca-file the node's
// certificate must verify against the system roots), plain HTTP otherwise.
func (a *adminFlags) client() (*server.AdminClient, error) {
	if a.caFile == "" && !strings.HasPrefix(a.server, "https://") {
		return server.NewAdminClient(a.server), nil
	}
	if strings.HasPrefix(a.server, "http://") {
		return nil, usageError{fmt.Errorf("--ca-file needs an https:// (or HOST:PORT) --server, not %s", a.server)}
	}
	cfg, err := server.ClientTLSConfig(a.caFile)
	if err != nil {
		return nil, usageError{fmt.Errorf("--ca-file: %w", err)}
	}
	return server.NewAdminClientTLS(a.server, cfg), nil
}
