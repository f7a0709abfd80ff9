// Command mink is the one mink binary: the server and the operator CLI.
// It only wires things up: flags, the config file and signals become a
// server.Config or an admin API call. See docs/cli.md.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
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
