package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/minkdb/mink/plan"
	"github.com/minkdb/mink/server"
)

const defaultAdminServer = "127.0.0.1:9480"

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect and manage the cluster",
	}
	cmd.AddCommand(newClusterStatusCmd(), newClusterRebalanceCmd())
	return cmd
}

func newClusterRebalanceCmd() *cobra.Command {
	var admin adminFlags
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Move orphaned buckets, then even out buckets led per node (run by the coordinator)",
		Long: `Moves buckets whose leader is not live first, then moves buckets from nodes
above 110% of the mean load to nodes below 90% of it, one LeadBucket per move,
waiting for each bucket to open on its new leader. Any node forwards the
request to the coordinator lease holder. --dry-run prints the plan only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := admin.client()
			if err != nil {
				return err
			}
			// A rebalance whose coordinator lost the lease stops; it goes on
			// on the next coordinator, which plans from what has moved.
			deadline := time.Now().Add(rebalanceRetryFor)
			for {
				err := c.Rebalance(cmd.Context(), dryRun, printRebalanceEvent(out, dryRun))
				if !errors.Is(err, server.ErrCoordinatorMoving) || time.Now().After(deadline) {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "mink: %v\n", err)
				fmt.Fprintln(out, "the coordinator changed; running the rebalance again on the next one")
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(time.Second):
				}
			}
		},
	}
	admin.register(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan without moving anything")
	return cmd
}

// rebalanceRetryFor bounds how long `mink cluster rebalance` keeps running
// the rebalance again while the coordinator lease moves.
const rebalanceRetryFor = 2 * time.Minute

// printRebalanceEvent prints the progress of a rebalance.
func printRebalanceEvent(out io.Writer, dryRun bool) func(server.RebalanceEvent) {
	return func(ev server.RebalanceEvent) {
		switch ev.Type {
		case "plan":
			if ev.Replan {
				fmt.Fprintf(out, "the cluster changed; %d moves left:\n", len(ev.Moves))
				printMoves(out, ev.Moves)
				return
			}
			if len(ev.Moves) == 0 {
				fmt.Fprintf(out, "nothing to move (coordinator: node %d)\n", ev.By)
				return
			}
			fmt.Fprintf(out, "plan (coordinator: node %d): %d moves\n", ev.By, len(ev.Moves))
			printMoves(out, ev.Moves)
		case "moved":
			fmt.Fprintf(out, "[%d/%d] bucket %d now led by node %d (%d ms)\n", ev.Done, ev.Total, ev.Move.Bucket, ev.Move.To, ev.ElapsedMS)
		case "done":
			if dryRun {
				fmt.Fprintln(out, "dry run: nothing moved")
			} else if ev.Total > 0 {
				fmt.Fprintf(out, "done: %d buckets moved\n", ev.Total)
			}
		}
	}
}

func newTableCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "table", Short: "Inspect tables"}
	var admin adminFlags
	var asJSON bool
	buckets := &cobra.Command{
		Use:   "buckets NAME",
		Short: "Show each bucket of a table: leader, leader epoch, whether it is open",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := admin.client()
			if err != nil {
				return err
			}
			bs, err := c.TableBuckets(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), bs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BUCKET\tPARTITION\tINDEX\tLEADER\tLEADER EPOCH\tOPEN\tSTART\tCOMMITTED END")
			for _, b := range bs {
				open := "no"
				if b.Open {
					open = "yes"
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%d\t%d\n", b.Bucket, dash(b.Partition), b.Index, b.Leader, b.LeaderEpoch, open, b.Start, b.End)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, b := range bs {
				if b.Error != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\nbucket %d: %s\n", b.Bucket, b.Error)
				}
			}
			return nil
		},
	}
	admin.register(buckets.Flags())
	buckets.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.AddCommand(buckets)
	return cmd
}

func newClusterStatusCmd() *cobra.Command {
	var admin adminFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the nodes (id, epoch, liveness, addresses, buckets led) and the coordinator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := admin.client()
			if err != nil {
				return err
			}
			st, err := c.ClusterStatus(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), st)
			}
			printClusterStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	admin.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func printClusterStatus(w io.Writer, st server.ClusterStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tEPOCH\tLIVE\tBUCKETS\tPG\tFLIGHT\tKAFKA\tADMIN")
	for _, n := range st.Nodes {
		live := "no"
		if n.Live {
			live = "yes"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", n.ID, n.Epoch, live, n.BucketsLed,
			dash(n.Addrs.PG), dash(n.Addrs.Flight), dash(n.Addrs.Kafka), dash(n.Addrs.Admin))
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

// printJSON prints v as indented JSON: the --json output of the status
// commands.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printMoves prints the moves of a rebalance plan, one per line.
func printMoves(out io.Writer, moves []plan.Move) {
	for _, m := range moves {
		from := fmt.Sprintf("node %d", m.From)
		if m.From == 0 {
			from = "no leader"
		}
		fmt.Fprintf(out, "  bucket %d: %s -> node %d\n", m.Bucket, from, m.To)
	}
}
