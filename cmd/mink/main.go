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
	server       string
	caFile       string
	user         string
	passwordFile string
}

// passwordEnv holds the admin password when --password-file is not given.
const passwordEnv = "MINK_PASSWORD"

func (a *adminFlags) register(f *pflag.FlagSet) {
	f.StringVar(&a.server, "server", defaultAdminServer, "admin address of any mink node: HOST:PORT, http://HOST:PORT or https://HOST:PORT")
	f.StringVar(&a.caFile, "ca-file", "", "PEM CA bundle that verifies the node's certificate; implies https (a node started with --tls-cert-file)")
	f.StringVar(&a.user, "user", server.BootstrapUser, "the superuser to authenticate as")
	f.StringVar(&a.passwordFile, "password-file", "", "file whose first line is the user's password (default: the "+passwordEnv+" environment variable)")
}

// client is the admin client the flags describe: HTTPS when --ca-file is
// given or --server starts with https:// (without --ca-file the node's
// certificate must verify against the system roots), plain HTTP otherwise;
// with the password of --password-file, else of $MINK_PASSWORD, else none
// (which a node in trust mode accepts).
func (a *adminFlags) client() (*server.AdminClient, error) {
	password, err := a.password()
	if err != nil {
		return nil, err
	}
	var c *server.AdminClient
	switch {
	case a.caFile == "" && !strings.HasPrefix(a.server, "https://"):
		c = server.NewAdminClient(a.server)
	case strings.HasPrefix(a.server, "http://"):
		return nil, usageError{fmt.Errorf("--ca-file needs an https:// (or HOST:PORT) --server, not %s", a.server)}
	default:
		cfg, err := server.ClientTLSConfig(a.caFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--ca-file: %w", err)}
		}
		c = server.NewAdminClientTLS(a.server, cfg)
	}
	c.User, c.Password = a.user, password
	return c, nil
}

// password is the first line of --password-file, or $MINK_PASSWORD.
func (a *adminFlags) password() (string, error) {
	if a.passwordFile == "" {
		return os.Getenv(passwordEnv), nil
	}
	data, err := os.ReadFile(a.passwordFile)
	if err != nil {
		return "", usageError{fmt.Errorf("--password-file: %w", err)}
	}
	password, _, _ := strings.Cut(string(data), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return "", usageError{fmt.Errorf("--password-file %s: the first line is empty", a.passwordFile)}
	}
	return password, nil
}
