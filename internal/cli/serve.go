package cli

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/logging"
	"github.com/aegis-sentinel/aegis/internal/origin"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/secretrules"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
	"github.com/aegis-sentinel/aegis/internal/tracing"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// serveConfig is the --config file: strict YAML, unknown keys are errors.
type serveConfig struct {
	Listen    string           `yaml:"listen"`
	Upstreams []upstreamConfig `yaml:"upstreams"`
	// Default names the upstream for models no upstream lists.
	Default string `yaml:"default"`
	// Policy is a policy file path, or an inline policy document.
	Policy yaml.Node `yaml:"policy"`
	Auth   struct {
		TokenFile string `yaml:"token_file"`
	} `yaml:"auth"`
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// AllowOrigins lists the web origins (beyond loopback ones) whose
	// pages may call the gateway; AllowHosts the Host names (beyond
	// localhost and IP addresses) it answers on a loopback listener
	// without a token.
	AllowOrigins []string `yaml:"allow_origins"`
	AllowHosts   []string `yaml:"allow_hosts"`
	// AllowManagement lets Ollama's pull, push, copy, delete and create
	// through; by default they are refused.
	AllowManagement bool `yaml:"allow_management"`
	// MaxConcurrentStreams caps generating requests in flight (503 past it).
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// MaxResponseBytes caps the output one response may hold.
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// KeepAlive is the silence after which a streamed answer whose text
	// is held gets an SSE comment line: a duration such as 15s (the
	// default), or off.
	KeepAlive string `yaml:"keep_alive"`
	// Incidents configures the incident log (see observe.go).
	Incidents incidentsConfig `yaml:"incidents"`
	// LogFormat is auto (JSON unless stderr is a terminal), json or text.
	LogFormat string `yaml:"log_format"`
	// GuardServer runs a guard model beside the gateway (serve_guard.go).
	GuardServer guardServerConfig `yaml:"guard_server"`
	// GuardClassifier is a classifier model file written by aegis train,
	// used instead of the one built into aegis.
	GuardClassifier string `yaml:"guard_classifier"`
	// Fleet joins other gateways and guard workers over NATS (serve_fleet.go).
	Fleet fleetConfig `yaml:"fleet"`

	// clock, when set, times the gateway's requests and the fleet's
	// approvals (tests); nil is the wall clock.
	clock clock.Clock
}

type upstreamConfig struct {
	Name   string   `yaml:"name"`
	URL    string   `yaml:"url"`
	Kind   string   `yaml:"kind"`
	Models []string `yaml:"models"`
}

func loadServeConfig(path string) (*serveConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var c serveConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, policy.FixYAMLLine(err))
	}
	return &c, nil
}

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			listen, upURL, kind, configPath, policyPath, tokenFile string
			guardClassifier                                        string
			maxBody                                                int64
			maxStreams                                             int
			incidentsPath, logFormat                               string
			host                                                   string
			port                                                   int
			guardFlagVals                                          guardServerConfig
			fleetFlagVals                                          fleetConfig
			cpuProfile, memProfile                                 string
			insecureNoAuth, check                                  bool
			allowOrigins, allowHosts                               []string
		)
		c := &cobra.Command{
			Use:   "serve",
			Short: "Run the OpenAI-compatible checking gateway in front of an upstream model server",
			Long: `serve runs the gateway: point an OpenAI client at it instead of at llama-server, Ollama or
any OpenAI-compatible server, and every response is checked, repaired or stopped.

  aegis serve --upstream http://127.0.0.1:8080

listens on 127.0.0.1:8088, detects the upstream's kind (llama-server, ollama, openai) and
applies the default policy. Endpoints: POST /v1/chat/completions, POST /v1/completions,
POST /v1/messages (Anthropic Messages, and /v1/messages/count_tokens passed through),
POST /v1/responses (OpenAI Responses), POST /v1/embeddings, GET /v1/models and
/v1/models/{id}, GET /health, GET and HEAD / (a heartbeat), and in front of Ollama its API: /api/chat and /api/generate checked, model
information and embeddings passed through, model management refused unless the config sets
allow_management: true.
A bearer token is required when --auth-token-file or AEGIS_AUTH_TOKEN is set. A JSON body
is read whatever its Content-Type; web pages may call the gateway only from loopback
origins and those of --allow-origin, and without a token only through localhost, an IP
address or an --allow-host name (DNS rebinding protection).

The same listener serves Prometheus metrics at /metrics and the live dashboard at /ui.
Every hidden retry and halt goes to the incident log (--incidents-db; read it with
aegis incidents), and each request is logged on one line (JSON unless stderr is a
terminal; outputs only when the policy sets log_text).

SIGHUP, or saving the config or policy file, reloads them: new requests get the new policy
and upstreams, streams in flight finish with theirs, and a file that does not load is refused
(its file and line logged) while the running one stays. --check validates the configuration
and policy and exits. Under systemd (Type=notify) serve reports ready, reloading and stopping
and feeds the watchdog. OpenTelemetry traces go out over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
(or OTEL_TRACES_EXPORTER=otlp) is set; see docs/operations.md.

The upstream may be written host:port or as an OpenAI base URL ending in /v1; Aegis
starts even while it is down and detects its kind when it first answers. Every flag
can also be set in the environment as AEGIS_ and its name in capitals, dashes as
underscores: AEGIS_UPSTREAM, AEGIS_LISTEN, AEGIS_POLICY, AEGIS_MAX_BODY_BYTES, ...
(the command line wins).`,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := flagsFromEnv(cmd.Flags()); err != nil {
					return usageErr(err)
				}
				if cmd.Flags().Changed("incidents") {
					fmt.Fprintln(stdio.Err, "aegis serve: --incidents is now --incidents-db (the same flag as for aegis incidents)")
				}
				if cmd.Flags().Changed("host") || cmd.Flags().Changed("port") {
					var err error
					if listen, err = hostPort(listen, host, port); err != nil {
						return usageErr(err)
					}
					cmd.Flags().Set("listen", listen)
				}
				// load reads the configuration and applies the flags over it; a
				// reload runs it again.
				load := func() (*serveConfig, error) {
					cfg := &serveConfig{}
					if configPath != "" {
						var err error
						if cfg, err = loadServeConfig(configPath); err != nil {
							return nil, usageErr(err)
						}
					}
					if cmd.Flags().Changed("listen") || cfg.Listen == "" {
						cfg.Listen = listen
					}
					if upURL != "" {
						cfg.Upstreams = append([]upstreamConfig{{Name: "default", URL: upURL, Kind: kind}}, cfg.Upstreams...)
					}
					if len(cfg.Upstreams) == 0 {
						return nil, usagef("serve needs an upstream: --upstream URL or upstreams in --config")
					}
					if err := checkDefault(cfg); err != nil {
						return nil, err
					}
					if tokenFile != "" {
						cfg.Auth.TokenFile = tokenFile
					}
					if maxBody != 0 {
						cfg.MaxBodyBytes = maxBody
					}
					cfg.AllowOrigins = append(cfg.AllowOrigins, allowOrigins...)
					cfg.AllowHosts = append(cfg.AllowHosts, allowHosts...)
					if cmd.Flags().Changed("max-concurrent-streams") {
						cfg.MaxConcurrentStreams = maxStreams
					}
					if incidentsPath != "" {
						cfg.Incidents.Path = incidentsPath
					}
					if logFormat != "" {
						cfg.LogFormat = logFormat
					}
					cfg.GuardServer = cfg.GuardServer.merge(guardFlagVals)
					if guardClassifier != "" {
						cfg.GuardClassifier = guardClassifier
					}
					cfg.Fleet = cfg.Fleet.merge(fleetFlagVals)
					if configPath != "" && cfg.Policy.Kind == yaml.ScalarNode {
						cfg.Policy.Value = policyPathFrom(configPath, cfg.Policy.Value)
					}
					return cfg, nil
				}
				cfg, err := load()
				if err != nil {
					return err
				}
				if cpuProfile != "" {
					stop, err := startCPUProfile(cpuProfile)
					if err != nil {
						return err
					}
					defer stop()
				}
				if memProfile != "" {
					defer writeAllocProfile(memProfile, stdio)
				}
				files := reloadFiles{config: configPath, policy: policyPath}
				if check {
					return checkServe(stdio, cfg, policyPath)
				}
				return runServe(cmd.Context(), stdio, cfg, policyPath, insecureNoAuth, load, files)
			},
		}
		f := c.Flags()
		f.StringVar(&listen, "listen", "127.0.0.1:8088", "host:port to listen on, a host (on port 8088), or a port (on 127.0.0.1); another host than loopback needs a bearer token or --insecure-no-auth")
		f.StringVar(&host, "host", "", "host or address to listen on, with the port of --listen or --port")
		f.IntVar(&port, "port", 0, "port to listen on, with the host of --listen or --host")
		f.StringVar(&upURL, "upstream", "", "base URL of the model server, such as http://127.0.0.1:8080 (host:port and .../v1 work too)")
		f.StringVar(&kind, "kind", "", "upstream kind: llama-server, ollama or openai (default: detect)")
		f.StringVar(&configPath, "config", "", "YAML config: listen, upstreams [{name, url, kind, models}], default, policy, auth")
		f.StringVar(&policyPath, "policy", "", "policy YAML file (default: the built-in policy)")
		f.StringVar(&tokenFile, "auth-token-file", "", "file holding the bearer token clients must send (or env AEGIS_AUTH_TOKEN)")
		f.BoolVar(&check, "check", false, "check the configuration and policy (the files and every check they name), then exit: 0 when they load, 2 with the file and line otherwise")
		f.BoolVar(&insecureNoAuth, "insecure-no-auth", false, "allow a non-loopback --listen address without a bearer token (warns loudly)")
		f.StringSliceVar(&allowOrigins, "allow-origin", nil, "web origin (scheme://host[:port], or *) whose pages may call the gateway; loopback origins always may (repeat or comma-separate)")
		f.StringSliceVar(&allowHosts, "allow-host", nil, "Host name answered besides localhost and IP addresses (a loopback listener without a token refuses others)")
		f.Int64Var(&maxBody, "max-body-bytes", 0, "largest request body accepted (default 4 MiB)")
		f.IntVar(&maxStreams, "max-concurrent-streams", gateway.DefaultMaxConcurrentStreams, "generating requests served at once; more are answered 503")
		f.StringVar(&incidentsPath, "incidents-db", "", "incident log: a SQLite file (default $AEGIS_INCIDENTS or $XDG_STATE_HOME/aegis/incidents.db, as for aegis incidents) or a postgres:// URL shared by several gateways")
		f.StringVar(&incidentsPath, "incidents", "", "the former name of --incidents-db")
		f.MarkHidden("incidents")
		f.StringVar(&logFormat, "log-format", "", "log format: auto (JSON unless stderr is a terminal), json or text")
		f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) to this file until the server stops")
		f.StringVar(&memProfile, "memprofile", "", "write an allocation profile (go tool pprof) to this file when the server stops")
		guardFlags(c, &guardFlagVals)
		classifierFlag(c, &guardClassifier)
		fleetFlags(c, &fleetFlagVals)
		return c
	})
}

func runServe(ctx context.Context, stdio *IO, cfg *serveConfig, policyPath string, insecureNoAuth bool,
	load func() (*serveConfig, error), files reloadFiles) error {
	format, err := logging.ParseFormat(cfg.LogFormat)
	if err != nil {
		return usageErr(err)
	}
	slogger := logging.New(stdio.Err, logging.Options{Format: format})
	logger := slog.NewLogLogger(slogger.Handler(), slog.LevelWarn)
	cfg.Incidents.gateway = cfg.Fleet.gatewayName(cfg.Listen)
	listenAt, err := listenAddr(cfg.Listen)
	if err != nil {
		return usageErr(err)
	}
	// The configuration is checked before anything starts, so a bad one
	// ends with its own message alone.
	if err := checkDefault(cfg); err != nil {
		return err
	}
	if cfg.GuardServer.Model != "" {
		if err := checkFile("--guard-model", cfg.GuardServer.Model); err != nil {
			return err
		}
	}
	browsers := &origin.Policy{AllowOrigins: cfg.AllowOrigins, AllowHosts: cfg.AllowHosts,
		HostFlag: "--allow-host", OriginFlag: "--allow-origin"}
	if err := browsers.Validate(); err != nil {
		return usageErr(err)
	}
	pol, err := servePolicy(cfg, policyPath)
	if err != nil {
		return usageErr(err)
	}
	if fo := cfg.GuardServer.FailOpen; fo != nil { // a shorthand for the policy's rule
		if pol, err = pol.WithFailOpen(*fo, "guard_server.fail_open"); err != nil {
			return usageErr(err)
		}
	}
	inputCheck, err := serveInputGuard(pol, cfg.GuardClassifier)
	if err != nil {
		return err
	}
	obs, err := startObservability(slogger, cfg.Incidents)
	if err != nil {
		return err
	}
	defer obs.Close()
	defer publishGuardCalls(obs.Bus)()
	tp, stopTracing, err := startTracing(ctx, "aegis", slogger)
	if err != nil {
		return err
	}
	defer stopTracing()

	b := &gatewayBuilder{obs: obs, tp: tp, log: slogger, errLog: logger, clock: cfg.clock}
	if cfg.Auth.TokenFile != "" {
		raw, err := os.ReadFile(cfg.Auth.TokenFile)
		if err != nil {
			return usagef("auth token: %v", err)
		}
		b.token = strings.TrimSpace(string(raw))
	} else if t := os.Getenv("AEGIS_AUTH_TOKEN"); t != "" {
		b.token = t
	}
	if cfg.GuardServer.Model != "" {
		sup, err := startGuardServer(ctx, cfg.GuardServer, obs.Bus, slogger)
		if err != nil {
			return err
		}
		defer sup.Stop(context.Background())
		b.sup = sup
	}
	leave, err := startFleet(ctx, cfg, obs, slogger)
	if err != nil {
		return err
	}
	defer leave()
	g, names, err := b.build(ctx, cfg, pol, inputCheck)
	if err != nil {
		return err
	}
	live := &liveGateway{}
	live.cur.Store(g)
	// A decision taken after a reload denies the call it names: the
	// policy that held it no longer applies.
	obs.Approvals.PolicyVersion = func() string { return live.cur.Load().Policy.Version }

	// gitleaks' rules, which leak and the tool policy read, compile once
	// per process (about 0.1 s of CPU): before listening, so that no
	// request waits for them.
	secretrules.Default()
	ln, err := net.Listen("tcp", listenAt)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	shown := shownAddr(listenAt, ln.Addr())
	if err := checkExposure(ln.Addr(), shown, b.token != "", insecureNoAuth, slogger); err != nil {
		ln.Close()
		return err
	}
	// Web pages are kept out by their Origin, and on a loopback listener
	// without a token by their Host too (DNS rebinding), as the dashboard is.
	browsers.CheckHost = isLoopback(ln.Addr()) && b.token == ""
	obs.Dashboard.AllowHosts = cfg.AllowHosts
	srv := gateway.NewServer(browsers.Wrap(obs.Handler(tp.Handler(live), b.token)), logger)
	auth := "no auth"
	if b.token != "" {
		auth = "bearer token required"
	}
	slogger.Info(fmt.Sprintf("listening on http://%s, guarding %s with policy %s (%s)", shown, strings.Join(names, ", "), pol.Source, auth),
		"url", "http://"+shown, "dashboard", "http://"+shown+"/ui/",
		"metrics", "http://"+shown+"/metrics", "incidents", obs.Incidents.Path())

	rl := newReloader(files, cfg, policyPath, load, b, live, slogger, obs)
	rctx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	rdone := rl.start(rctx)
	defer func() { stopReload(); <-rdone }()
	stopNotify := notifyServiceManager(rctx, slogger, "http://"+ln.Addr().String()+"/")
	defer stopNotify()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	notifyStopping()
	slogger.Info("shutting down; finishing streams in flight (up to 10s)")
	obs.CloseStreams() // dashboard streams would hold Shutdown for its whole timeout
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // cancels the remaining streams and their upstream requests
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// gatewayBuilder builds the gateway of one configuration: at start and
// again at every reload, with what lives across reloads (the event bus,
// tracing, the bearer token, the supervised guard server, the fleet).
type gatewayBuilder struct {
	obs    *observability
	tp     *tracing.Provider
	log    *slog.Logger
	errLog *log.Logger
	token  string
	sup    *supervisor.Supervisor
	clock  clock.Clock

	mu    sync.Mutex
	known map[string]*upstream.Upstream // by name: kinds detected and connections kept across reloads
}

// build makes the gateway of cfg under pol, and the upstreams' names for
// the log.
func (b *gatewayBuilder) build(ctx context.Context, cfg *serveConfig, pol *policy.Policy,
	inputCheck func(context.Context, *validator.Request) *validator.Verdict) (*gateway.Gateway, []string, error) {
	keepAlive, err := cfg.keepAlive()
	if err != nil {
		return nil, nil, err
	}
	g := &gateway.Gateway{KeepAlive: keepAlive, MaxBodyBytes: cfg.MaxBodyBytes, ErrorLog: b.errLog, Events: b.obs.Bus, AllowManagement: cfg.AllowManagement,
		MaxConcurrentStreams: cfg.MaxConcurrentStreams, MaxResponseBytes: cfg.MaxResponseBytes,
		Policy: pol, InputCheck: countedInput(b.obs.Bus, inputCheck), AuthToken: b.token, Approvals: b.obs.Approvals, Clock: b.clock}
	b.mu.Lock()
	defer b.mu.Unlock()
	known := map[string]*upstream.Upstream{}
	var def *upstream.Upstream
	var names []string
	for i, uc := range cfg.Upstreams {
		if uc.Name == "" {
			uc.Name = fmt.Sprintf("upstream%d", i+1)
		}
		k, err := upstream.ParseKind(uc.Kind)
		if err != nil {
			return nil, nil, usagef("upstream %s: %v", uc.Name, err)
		}
		base, notes, err := upstream.Normalize(uc.URL)
		if err != nil {
			return nil, nil, usagef("upstream %s: %v", uc.Name, err)
		}
		for _, n := range notes {
			b.log.Warn(n)
		}
		u, err := upstream.New(uc.Name, base, k)
		if err != nil {
			return nil, nil, usageErr(err)
		}
		u.Models = uc.Models
		if old := b.known[uc.Name]; old != nil && old.URL.String() == u.URL.String() {
			// The same server: keep its connections, and its kind when
			// the configuration leaves it to detection.
			u.Client = old.Client
			if k == upstream.KindUnknown {
				u.Kind = old.Kind
			}
		} else {
			traceUpstream(b.tp, u)
		}
		if u.Kind == upstream.KindUnknown {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			u.Kind, err = upstream.Detect(dctx, u)
			cancel()
			if err != nil {
				u.Kind = upstream.KindUnknown
				b.log.Warn(fmt.Sprintf("upstream %s (%s) is not answering; starting anyway, its kind will be detected when it answers", u.Name, base), "error", err.Error())
			}
		}
		if uc.Name == cfg.Default || def == nil && len(uc.Models) == 0 {
			def = u
		}
		known[uc.Name] = u
		g.Upstreams = append(g.Upstreams, u)
		names = append(names, fmt.Sprintf("%s %s (%s)", u.Name, u.URL, u.Kind))
	}
	b.known = known
	if def != nil {
		ups := g.Upstreams
		g.Route = func(model string) (*upstream.Upstream, error) {
			for _, u := range ups {
				if len(u.Models) > 0 && u.Serves(model) {
					return u, nil
				}
			}
			return def, nil
		}
	}
	if b.sup != nil {
		g.Policy = g.Policy.With(guardCheck(guardExtra(b.sup, cfg.GuardServer, b.log)))
	}
	if cfg.Fleet.NATS != "" && cfg.Fleet.GuardWorkers != "" {
		g.Policy = g.Policy.With(guardCheck(workerExtra(b.sup, cfg.GuardServer, cfg.Fleet, b.log)))
	}
	return g, names, nil
}

// servePolicy loads --policy, else the config's policy (a file path or an
// inline document), else the default.
func servePolicy(cfg *serveConfig, path string) (*policy.Policy, error) {
	if path != "" {
		return policy.Load(path)
	}
	switch cfg.Policy.Kind {
	case 0:
		return policy.Default(), nil
	case yaml.ScalarNode:
		return policy.Load(cfg.Policy.Value)
	}
	doc, err := yaml.Marshal(&cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("inline policy: %w", err)
	}
	return policy.Parse(doc, "config policy", validator.Default)
}

// serveInputGuard builds the embedded classifier's input screen from the
// policy's guard section (default: block high-risk prompt injection).
func serveInputGuard(pol *policy.Policy, classifierFile string) (func(context.Context, *validator.Request) *validator.Verdict, error) {
	ip := guard.DefaultInputPolicy()
	if err := pol.DecodeGuard(&ip); err != nil {
		return nil, usageErr(err)
	}
	if ip.Input == "off" && ip.ToolResults == "off" {
		return nil, nil // no screening: do not load the model at start-up
	}
	g, err := loadGuard(classifierFile)
	if err != nil {
		return nil, err
	}
	check, err := g.InputCheck(ip)
	if err != nil {
		return nil, usageErr(fmt.Errorf("policy %s: line %d: %w", pol.Source, guardKeyLine(pol, "input"), err))
	}
	return check, nil
}
