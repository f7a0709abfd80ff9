package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/minkdb/mink/server"
)

func newTieringCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tiering",
		Short: "Inspect and trigger tiering into the Iceberg lake (run by the coordinator)",
	}
	cmd.AddCommand(newTieringStatusCmd(), newTieringRunCmd())
	return cmd
}

func newTieringStatusCmd() *cobra.Command {
	var admin adminFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show per table: tiered rows versus committed rows, lag in rows and seconds, the last round and the last error",
		Long: `Shows, for every table, how far tiering has got: the rows tiered into the
lake versus the rows committed to its bucket streams (per bucket with --json),
the lag in rows and seconds, the last round and the last error. Any node
forwards the request to the coordinator lease holder, which runs tiering.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := admin.client()
			if err != nil {
				return err
			}
			st, err := c.TieringStatus(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), st)
			}
			printTieringStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	admin.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with per-bucket offsets) instead of a table")
	return cmd
}

func printTieringStatus(out io.Writer, st server.TieringStatus) {
	fmt.Fprintf(out, "coordinator: node %d (epoch %d)\n", st.By, st.CoordinatorEpoch)
	if len(st.Tables) == 0 {
		fmt.Fprintln(out, "no tables")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tTIERING\tTIERED\tEND\tLAG ROWS\tLAG\tLAST ROUND\tLAST ERROR")
	for _, t := range st.Tables {
		state := "on (" + t.Freshness + ")"
		if !t.Enabled {
			state = "off: " + t.Reason
		} else if t.Running {
			state = "running"
		}
		last := "-"
		if t.LastRound != nil {
			last = fmt.Sprintf("%s: %d rows, %d file(s), %d ms", t.LastRound.At.Local().Format(time.TimeOnly),
				t.LastRound.Rows, t.LastRound.Files, t.LastRound.DurationMS)
			if t.LastRound.Repaired && t.LastRound.Files == 0 {
				last = t.LastRound.At.Local().Format(time.TimeOnly) + ": recorded a lake snapshot"
			}
		} else if t.RecordedAt != nil {
			last = t.RecordedAt.Local().Format(time.DateTime)
		}
		lag := "0s"
		if t.LagRows > 0 {
			lag = (time.Duration(t.LagSeconds * float64(time.Second))).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", t.Table, state, t.Tiered, t.End, t.LagRows, lag, last, dash(t.LastError))
	}
	tw.Flush()
}

func newTieringRunCmd() *cobra.Command {
	var admin adminFlags
	var table string
	var wait bool
	cmd := &cobra.Command{
		Use:   "run --table NAME [--wait]",
		Short: "Start a tiering round of a table now",
		Long: `Asks the coordinator lease holder for a tiering round of the table now. With
--wait the command runs the round and shows its progress (buckets written,
lake snapshot committed, offsets recorded) until it is done; the round tiers
the rows committed to the table's bucket streams, which includes every write
acknowledged before the command started. Without --wait it returns once the
round is queued.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if table == "" {
				return usageError{fmt.Errorf("--table is required")}
			}
			out := cmd.OutOrStdout()
			c, err := admin.client()
			if err != nil {
				return err
			}
			return c.TieringRun(cmd.Context(), table, wait, func(ev server.TieringRunEvent) {
				switch ev.Type {
				case "queued":
					fmt.Fprintf(out, "round of %s queued on node %d\n", ev.Table, ev.By)
				case "progress":
					p := ev.Progress
					switch p.Stage {
					case "repaired":
						fmt.Fprintf(out, "recorded lake snapshot %d, which the metadata log had missed\n", p.SnapshotID)
					case "planned":
						var rows uint64
						for _, r := range p.Ranges {
							rows += r[1] - r[0]
						}
						fmt.Fprintf(out, "round of %s on node %d: %d rows in %d buckets\n", ev.Table, ev.By, rows, len(p.Ranges))
					case "bucket":
						fmt.Fprintf(out, "  bucket %d: offsets [%d, %d): %d rows, %d files, %d bytes\n", p.Bucket, p.From, p.To, p.Rows, p.Files, p.Bytes)
					case "committed":
						fmt.Fprintf(out, "committed lake snapshot %d (sequence %d)\n", p.SnapshotID, p.Sequence)
					case "retired":
						fmt.Fprintf(out, "deleting the lake rows of %d buckets the table no longer has (TRUNCATE, dropped partitions): %d files\n", len(p.Buckets), p.Files)
					case "recorded":
						fmt.Fprintln(out, "recorded the tiered offsets in the metadata log")
					}
				case "done":
					r := ev.Result
					switch {
					case r.Rows == 0 && len(r.RetiredBuckets) > 0:
						fmt.Fprintf(out, "done: no rows to tier; %d files of %d retired buckets deleted from the lake\n", r.RetiredFiles, len(r.RetiredBuckets))
					case r.Rows == 0 && !r.Repaired:
						fmt.Fprintf(out, "nothing to tier: %s is up to date\n", ev.Table)
					default:
						fmt.Fprintf(out, "done: %d rows tiered", r.Rows)
						if ev.LagRows > 0 {
							fmt.Fprintf(out, " (%d rows committed since)", ev.LagRows)
						}
						fmt.Fprintln(out)
					}
				}
			})
		},
	}
	admin.register(cmd.Flags())
	cmd.Flags().StringVar(&table, "table", "", "the table to tier")
	cmd.Flags().BoolVar(&wait, "wait", false, "run the round now and show its progress until it is done")
	return cmd
}
