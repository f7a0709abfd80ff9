package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/minkdb/mink/server"
)

const defaultAdminServer = "127.0.0.1:9480"

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect and manage the cluster",
	}
	cmd.AddCommand(newClusterStatusCmd())
	return cmd
}

func newClusterStatusCmd() *cobra.Command {
	var addr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the nodes (id, epoch, liveness, addresses, buckets led) and the coordinator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := server.NewAdminClient(addr).ClusterStatus(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printClusterStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "server", defaultAdminServer, "admin address (HOST:PORT) of any mink node")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func printClusterStatus(w io.Writer, st server.ClusterStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tEPOCH\tLIVE\tBUCKETS\tPG\tFLIGHT\tADMIN")
	for _, n := range st.Nodes {
		live := "no"
		if n.Live {
			live = "yes"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\n", n.ID, n.Epoch, live, n.BucketsLed,
			dash(n.Addrs.PG), dash(n.Addrs.Flight), dash(n.Addrs.Admin))
	}
	tw.Flush()
	fmt.Fprintln(w)
	switch {
	case st.Coordinator.Epoch == 0:
		fmt.Fprintln(w, "coordinator: none registered yet")
	default:
		fmt.Fprintf(w, "coordinator: node %d, epoch %d", st.Coordinator.Node, st.Coordinator.Epoch)
		if st.Coordinator.LeaseHolder != st.Coordinator.Node {
			if st.Coordinator.LeaseHolder == 0 {
				fmt.Fprint(w, " (lease currently unheld)")
			} else {
				fmt.Fprintf(w, " (lease now held by node %d, registering)", st.Coordinator.LeaseHolder)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "metadata log: applied index %d (answered by node %d)\n", st.AppliedIndex, st.AnsweredBy)
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
