package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/logging"
	"github.com/aegis-sentinel/aegis/internal/mcp"
	"github.com/aegis-sentinel/aegis/internal/origin"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/secretrules"
)

// mcpFlags are the flags every aegis mcp proxy takes.
type mcpFlags struct {
	name, policyPath, incidentsPath, logFormat, listen string
	nats, fleetName                                    string
}

func (f *mcpFlags) add(c *cobra.Command, listenDefault, listenHelp string) {
	fl := c.Flags()
	fl.StringVar(&f.name, "name", "", "the server's name in pins, metrics and incidents (default: from the command or URL)")
	fl.StringVar(&f.policyPath, "policy", "", "policy YAML file, the same as for aegis serve (default: the built-in policy)")
	fl.StringVar(&f.incidentsPath, "incidents-db", "", "incident log and pin store: a SQLite file (default as for aegis serve) or a postgres:// URL")
	fl.StringVar(&f.logFormat, "log-format", "", "log format on stderr: auto (JSON unless stderr is a terminal), json or text")
	fl.StringVar(&f.listen, "listen", listenDefault, listenHelp)
	fl.StringVar(&f.nats, "nats", "", "NATS server URL: publish live events for every gateway's /ui and aegis fleet, as aegis serve does")
	fl.StringVar(&f.fleetName, "fleet-name", "", "this proxy's name in the fleet (default mcp-SERVER)")
}

// mcpRuntime is what a proxy runs with: the judge, the observability and
// the logger.
type mcpRuntime struct {
	proxy *mcp.Proxy
	obs   *observability
	pins  *mcp.Pins
	log   *slog.Logger
	leave func() // leaves the fleet
}

func (rt *mcpRuntime) Close() {
	if rt.leave != nil {
		rt.leave()
	}
	if rt.pins != nil {
		rt.pins.Close()
	}
	if rt.obs != nil {
		rt.obs.Close()
	}
}

func startMCP(stdio *IO, f mcpFlags, server string) (*mcpRuntime, error) {
	format, err := logging.ParseFormat(f.logFormat)
	if err != nil {
		return nil, usageErr(err)
	}
	log := logging.New(stdio.Err, logging.Options{Format: format})
	pol := policy.Default()
	if f.policyPath != "" {
		if pol, err = policy.Load(f.policyPath); err != nil {
			return nil, usageErr(err)
		}
	}
	secretrules.Default() // compiled before the first call, not during it (see runServe)
	judge, err := mcp.NewJudge(pol)
	if err != nil {
		return nil, usageErr(err)
	}
	judge.Log = log
	rt := &mcpRuntime{log: log}
	if rt.obs, err = startObservability(log, incidentsConfig{Path: f.incidentsPath}); err != nil {
		return nil, err
	}
	if judge.Pins, err = mcp.OpenPins(context.Background(), f.incidentsPath); err != nil {
		rt.Close()
		return nil, err
	}
	rt.pins = judge.Pins
	rt.proxy = &mcp.Proxy{Judge: judge, Server: server, Bus: rt.obs.Bus, Metrics: mcp.NewMetrics(rt.obs.Metrics.Registry())}
	if f.nats != "" {
		name := f.fleetName
		if name == "" {
			name = "mcp-" + server
		}
		nc, err := fleet.Connect(f.nats, "aegis mcp", log)
		if err != nil {
			rt.Close()
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		pub := fleet.NewGateway(nc, rt.obs.Bus, name, f.listen)
		done := make(chan struct{})
		go func() { defer close(done); pub.Run(ctx) }()
		rt.leave = func() { cancel(); <-done; nc.Close() }
		log.Info("joined the fleet", "nats", f.nats, "gateway", name, "events", pub.Subject())
	}
	return rt, nil
}

// serveSide serves /metrics and /ui (and h, when given, for everything
// else) on listen until ctx ends; an empty listen serves nothing.
func (rt *mcpRuntime) serveSide(ctx context.Context, listen string, h http.Handler) (addr string, stop func(), err error) {
	if listen == "" {
		return "", func() {}, nil
	}
	at, err := listenAddr(listen)
	if err != nil {
		return "", nil, usageErr(err)
	}
	ln, err := net.Listen("tcp", at)
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	if err := checkExposure(ln.Addr(), shownAddr(at, ln.Addr()), false, false, rt.log); err != nil {
		ln.Close()
		return "", nil, err
	}
	if h == nil {
		h = http.NotFoundHandler()
	}
	// No token here: web pages are kept out by their Origin and Host, as
	// on serve's listener (DNS rebinding).
	browsers := &origin.Policy{CheckHost: isLoopback(ln.Addr())}
	srv := gateway.NewServer(browsers.Wrap(rt.obs.Handler(h, "")), slog.NewLogLogger(rt.log.Handler(), slog.LevelWarn))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		rt.obs.CloseStreams()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}

func init() {
	register(func(stdio *IO) *cobra.Command {
		root := &cobra.Command{
			Use:   "mcp",
			Short: "Guard MCP servers: check tool listings, tool calls and tool results",
			Long: `mcp runs the Sentinel in front of a Model Context Protocol server. The client starts or
connects to aegis instead of the server; every message passes through unchanged except:

  tools/list   each tool's description and schemas are screened for poisoning (hidden
               instruction blocks, instructions to the model, requests for credentials,
               secrecy towards the user) and pinned: the first description and input schema
               a server shows are recorded, and a later change is flagged (warn, hide or
               refuse, by policy). 'aegis mcp pins' lists and approves pins.
  tools/call   the arguments pass the policy's text checks (leak, banned, regex, guard)
               before the server sees them; a refused call gets a JSON-RPC error naming
               the aegis_<reason> code.
  results      secrets are redacted (or the result refused), injected instructions and
               oversized results are replaced by an error result the model can read.

The policy file is the one aegis serve reads; its mcp section tunes the above. Refusals,
redactions and flagged tools go to the same incident log, metrics and request log as the
gateway's.`,
		}
		root.AddCommand(mcpStdioCmd(stdio), mcpHTTPCmd(stdio), mcpPinsCmd(stdio))
		return root
	})
}

func mcpStdioCmd(stdio *IO) *cobra.Command {
	var f mcpFlags
	c := &cobra.Command{
		Use:   "stdio [flags] -- COMMAND [ARGS...]",
		Short: "Proxy an MCP server that speaks over stdio: put this in the client's config in place of the server",
		Long: `stdio starts COMMAND as the MCP server and speaks for it on its own stdin and stdout,
so a client's configuration runs aegis in place of the server:

  aegis mcp stdio -- npx -y @modelcontextprotocol/server-filesystem /home/me/notes

Logs go to stderr. With --listen, metrics (/metrics) and the dashboard (/ui) are served there.`,
		Example: `  aegis mcp stdio --name notes -- npx -y @modelcontextprotocol/server-filesystem ~/notes`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := flagsFromEnv(cmd.Flags()); err != nil {
				return usageErr(err)
			}
			name := f.name
			if name == "" {
				name = serverNameFromCommand(args)
			}
			rt, err := startMCP(stdio, f, name)
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx := cmd.Context()
			addr, stop, err := rt.serveSide(ctx, f.listen, nil)
			if err != nil {
				return err
			}
			defer stop()
			if addr != "" {
				rt.log.Info("metrics and dashboard", "url", "http://"+addr+"/ui/")
			}
			rt.proxy.Reaper = stdio.Self
			server := exec.Command(args[0], args[1:]...)
			server.Stderr = stdio.Err
			rt.log.Info(fmt.Sprintf("guarding MCP server %s (%s) over stdio", name, strings.Join(args, " ")))
			in := stdio.In
			if in == nil {
				in = os.Stdin
			}
			if err := rt.proxy.RunStdio(ctx, in, stdio.Out, server); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return &exitError{code: ExitFailure, err: err}
				}
				return err
			}
			return nil
		},
	}
	f.add(c, "", "also serve /metrics and /ui on this host:port (default: none)")
	return c
}

// serverNameFromCommand names a server after its package or program:
// "npx -y @modelcontextprotocol/server-filesystem /x" → "server-filesystem".
func serverNameFromCommand(args []string) string {
	for _, a := range args[1:] {
		if i := strings.LastIndex(a, "node_modules/"); i >= 0 { // node .../node_modules/@scope/pkg/dist/index.js
			parts := strings.Split(a[i+len("node_modules/"):], "/")
			if strings.HasPrefix(parts[0], "@") && len(parts) > 1 {
				return parts[1]
			}
			return parts[0]
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if strings.HasPrefix(a, "@") || strings.Contains(a, "/") && !strings.HasPrefix(a, "/") && !strings.HasPrefix(a, ".") {
			a = a[strings.LastIndex(a, "/")+1:]
			if i := strings.LastIndex(a, "@"); i > 0 {
				a = a[:i]
			}
			return a
		}
		if l := filepath.Base(args[0]); l == "npx" || l == "uvx" || l == "node" || l == "python" || l == "python3" || l == "docker" {
			return strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
		}
		break
	}
	return filepath.Base(args[0])
}

func mcpHTTPCmd(stdio *IO) *cobra.Command {
	var (
		f           mcpFlags
		upstreamURL string
	)
	c := &cobra.Command{
		Use:   "http --upstream URL",
		Short: "Proxy an MCP server that speaks Streamable HTTP",
		Long: `http is a Streamable HTTP reverse proxy: point the client at aegis's address instead of the
server's endpoint. POSTs, the server's event streams (GET), session ids and resumption with
Last-Event-ID pass through; the messages in them are judged as for stdio. Metrics (/metrics)
and the dashboard (/ui) are served on the same address.`,
		Example: `  aegis mcp http --upstream http://127.0.0.1:3001/mcp --listen 127.0.0.1:8089
  # the client connects to http://127.0.0.1:8089/mcp`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd.Flags()); err != nil {
				return usageErr(err)
			}
			if upstreamURL == "" {
				return usagef("mcp http needs --upstream URL (the MCP server's endpoint, such as http://127.0.0.1:3001/mcp)")
			}
			u, err := url.Parse(upstreamURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--upstream %q: want an http:// or https:// URL of the MCP endpoint", upstreamURL)
			}
			name := f.name
			if name == "" {
				name = u.Host
			}
			rt, err := startMCP(stdio, f, name)
			if err != nil {
				return err
			}
			defer rt.Close()
			hp := &mcp.HTTPProxy{Proxy: rt.proxy, Upstream: u}
			addr, stop, err := rt.serveSide(cmd.Context(), f.listen, hp)
			if err != nil {
				return err
			}
			rt.log.Info(fmt.Sprintf("listening on http://%s%s, guarding MCP server %s (%s)", addr, u.Path, name, u),
				"url", "http://"+addr+u.Path, "dashboard", "http://"+addr+"/ui/", "metrics", "http://"+addr+"/metrics")
			<-cmd.Context().Done()
			rt.log.Info("shutting down")
			hp.Shutdown() // the calls in flight are answered with an error
			stop()
			return nil
		},
	}
	f.add(c, "127.0.0.1:8089", "host:port to listen on, or a port (on 127.0.0.1)")
	c.Flags().StringVar(&upstreamURL, "upstream", "", "the MCP server's Streamable HTTP endpoint, such as http://127.0.0.1:3001/mcp")
	return c
}

func mcpPinsCmd(stdio *IO) *cobra.Command {
	var (
		db, server  string
		changedOnly bool
		asJSON      bool
	)
	c := &cobra.Command{
		Use:   "pins",
		Short: "List the pinned tool descriptions, and which tools changed since",
		Long: `pins lists, per server and tool, the description and input schema first seen (the pin)
and whether the server shows something else now. A changed tool is flagged by aegis mcp
(warned about, hidden or refused, by policy) until it is approved:

  aegis mcp pins approve SERVER [TOOL]

makes what the tool shows now its pin (every changed tool of SERVER without TOOL).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pins, err := mcp.OpenPins(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer pins.Close()
			list, err := pins.List(cmd.Context(), server, changedOnly)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdio.Out)
				for _, p := range list {
					if err := enc.Encode(p); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tTOOL\tSTATE\tPINNED\tHASH\tDESCRIPTION")
			for _, p := range list {
				state, desc := "pinned", p.Description
				if p.Changed {
					state, desc = "CHANGED "+p.ChangedAt.UTC().Format(time.RFC3339), p.NowDescription
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Server, p.Tool, state, p.PinnedAt.UTC().Format(time.RFC3339), p.Hash[:12], oneLine(desc, 60))
			}
			return tw.Flush()
		},
	}
	c.PersistentFlags().StringVar(&db, "incidents-db", "", "the incident log holding the pins (default as for aegis serve)")
	c.Flags().StringVar(&server, "server", "", "only this server's pins")
	c.Flags().BoolVar(&changedOnly, "changed", false, "only tools that changed since they were pinned")
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per pin")
	c.AddCommand(&cobra.Command{
		Use:   "approve SERVER [TOOL]",
		Short: "Make what a changed tool shows now its pin",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pins, err := mcp.OpenPins(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer pins.Close()
			tool := ""
			if len(args) == 2 {
				tool = args[1]
			}
			approved, err := pins.Approve(cmd.Context(), args[0], tool)
			if err != nil {
				return &exitError{code: ExitFailure, err: err}
			}
			if len(approved) == 0 {
				fmt.Fprintf(stdio.Out, "no changed tools of %s to approve\n", args[0])
			}
			for _, p := range approved {
				fmt.Fprintf(stdio.Out, "approved %s/%s: pin %s\n", p.Server, p.Tool, p.Hash[:12])
			}
			return nil
		},
	})
	return c
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n]) + "…"
	}
	return s
}
