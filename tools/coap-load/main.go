// coap-load measures a CoAP server with a client that is not corral's own: N closed-loop clients, each
// with its own UDP socket and exactly one request in flight, for a fixed time after a warm-up. It prints
// the answers by class, the latency quantiles and the rate, in the lines scripts/bench-lib.sh reads.
// Given an http:// URI it does the same over HTTP/1.1 (Go's net/http, one kept-alive connection per
// client), which is how scripts/bench-http.sh measures the gateway's HTTP→CoAP cross-proxy.
//
//	go build -o coap-load . && ./coap-load -uri coap://127.0.0.1:5683/test -c 16 -d 10s
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	"github.com/plgd-dev/go-coap/v3/udp"
	"github.com/plgd-dev/go-coap/v3/udp/client"
)

type config struct {
	http              string // the whole URI when it is http://, else ""
	host, path, query string
	clients           int
	duration, warmup  time.Duration
	timeout           time.Duration
	limit             int64
	non               bool
	method            codes.Code
	payload           []byte
}

// tally is one client's count of what it measured (requests finished inside the measured window).
type tally struct {
	ok, non2xx, timeouts, errs int64
	latencies                  []time.Duration
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coap-load:", err)
		os.Exit(2)
	}
	start := time.Now()
	from, until := start.Add(cfg.warmup), start.Add(cfg.warmup+cfg.duration)
	var sent atomic.Int64
	tallies := make([]tally, cfg.clients)
	var wg sync.WaitGroup
	if cfg.http != "" {
		for i := range tallies {
			wg.Add(1)
			go func(t *tally) {
				defer wg.Done()
				runHTTP(cfg, t, from, until, &sent)
			}(&tallies[i])
		}
		wg.Wait()
		report(cfg, tallies)
		return
	}
	for i := range tallies {
		conn, err := udp.Dial(cfg.host)
		if err != nil {
			fmt.Fprintln(os.Stderr, "coap-load: cannot reach", cfg.host+":", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func(t *tally, conn *client.Conn) {
			defer wg.Done()
			defer conn.Close()
			run(cfg, conn, t, from, until, &sent)
		}(&tallies[i], conn)
	}
	wg.Wait()
	report(cfg, tallies)
}

func parseFlags() (config, error) {
	uri := flag.String("uri", "", "the resource, coap://HOST:PORT/PATH[?QUERY] (required)")
	clients := flag.Int("c", 1, "closed-loop clients, each with its own socket and one request in flight")
	duration := flag.Duration("d", 10*time.Second, "how long to measure, after the warm-up")
	warmup := flag.Duration("warmup", time.Second, "how long to send before measuring (not counted)")
	timeout := flag.Duration("timeout", 5*time.Second, "how long one request may take before it counts as a timeout")
	limit := flag.Int64("n", 0, "stop after this many requests from all clients together (0: no cap)")
	non := flag.Bool("non", false, "send non-confirmable requests (default: confirmable)")
	method := flag.String("m", "GET", "the method: GET, POST or PUT")
	payload := flag.Int("payload", 0, "bytes of payload for POST or PUT")
	flag.Parse()
	cfg := config{clients: *clients, duration: *duration, warmup: *warmup, timeout: *timeout, limit: *limit, non: *non}
	u, err := url.Parse(*uri)
	if err == nil && u.Scheme == "http" && u.Host != "" {
		cfg.http, cfg.host, cfg.path = *uri, u.Host, u.Path
	} else if err != nil || u.Scheme != "coap" || u.Host == "" {
		return cfg, fmt.Errorf("-uri must be coap://HOST:PORT/PATH or http://HOST:PORT/PATH, got %q", *uri)
	}
	if cfg.http != "" {
		if *non {
			return cfg, errors.New("-non is a CoAP message type; it has no meaning over HTTP")
		}
	} else {
		cfg.host = u.Host
	}
	if cfg.http == "" && u.Port() == "" {
		cfg.host = u.Host + ":5683"
	}
	cfg.path, cfg.query = u.Path, u.RawQuery
	if cfg.path == "" {
		cfg.path = "/"
	}
	switch strings.ToUpper(*method) {
	case "GET":
		cfg.method = codes.GET
	case "POST":
		cfg.method = codes.POST
	case "PUT":
		cfg.method = codes.PUT
	default:
		return cfg, fmt.Errorf("-m must be GET, POST or PUT, got %q", *method)
	}
	if *payload > 0 {
		if cfg.method == codes.GET {
			return cfg, errors.New("-payload needs -m POST or -m PUT")
		}
		cfg.payload = bytes.Repeat([]byte{'x'}, *payload)
	}
	if cfg.clients < 1 || cfg.duration <= 0 || cfg.timeout <= 0 || cfg.warmup < 0 {
		return cfg, errors.New("-c must be at least 1, -d and -timeout above 0, -warmup not negative")
	}
	return cfg, nil
}

// run sends one request at a time until the measured window ends (or the cap is reached), counting the
// requests that finish inside the window.
func run(cfg config, conn *client.Conn, t *tally, from, until time.Time, sent *atomic.Int64) {
	for {
		begun := time.Now()
		if !begun.Before(until) || (cfg.limit > 0 && sent.Add(1) > cfg.limit) {
			return
		}
		code, err := once(cfg, conn)
		done := time.Now()
		if err != nil && closed(conn) {
			// The socket failed (an ICMP error on a connected socket closes go-coap's connection): this
			// client cannot go on; counted once, whenever it happened.
			t.errs++
			fmt.Fprintln(os.Stderr, "coap-load: a client stopped:", err)
			return
		}
		if done.Before(from) || !done.Before(until) {
			continue
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.timeouts++
		case err != nil:
			t.errs++
		case code >= codes.Created && code < codes.BadRequest:
			t.ok++
			t.latencies = append(t.latencies, done.Sub(begun))
		default:
			t.non2xx++
		}
	}
}

// runHTTP is run's twin over HTTP: one client with one kept-alive connection, one request at a time; a
// 2xx answer is ok, any other status non-2.xx, a transport error an error.
func runHTTP(cfg config, t *tally, from, until time.Time, sent *atomic.Int64) {
	c := &http.Client{Timeout: cfg.timeout, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	verb := map[codes.Code]string{codes.GET: "GET", codes.POST: "POST", codes.PUT: "PUT"}[cfg.method]
	for {
		begun := time.Now()
		if !begun.Before(until) || (cfg.limit > 0 && sent.Add(1) > cfg.limit) {
			return
		}
		var body io.Reader
		if cfg.payload != nil {
			body = bytes.NewReader(cfg.payload)
		}
		status, err := 0, error(nil)
		req, err := http.NewRequest(verb, cfg.http, body)
		if err == nil {
			var resp *http.Response
			if resp, err = c.Do(req); err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
		}
		done := time.Now()
		if done.Before(from) || !done.Before(until) {
			continue
		}
		switch {
		case err != nil && os.IsTimeout(err):
			t.timeouts++
		case err != nil:
			t.errs++
		case status >= 200 && status < 300:
			t.ok++
			t.latencies = append(t.latencies, done.Sub(begun))
		default:
			t.non2xx++
		}
	}
}

func closed(conn *client.Conn) bool {
	select {
	case <-conn.Done():
		return true
	default:
		return false
	}
}

// echoOption is RFC 9175's Echo, which go-coap does not name; it keeps the option's bytes all the same.
const echoOption = message.OptionID(252)

// once sends one request and returns the response's code. A server that has not seen this client prove
// its address may answer 4.01 with an Echo value (RFC 9175 §2.4, the reflection bound): the request is
// sent once more carrying it, as an Echo-aware client does, after which the server answers in full.
func once(cfg config, conn *client.Conn) (codes.Code, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	code, echo, err := exchange(ctx, cfg, conn, nil)
	if err == nil && code == codes.Unauthorized && echo != nil {
		code, _, err = exchange(ctx, cfg, conn, echo)
	}
	return code, err
}

// exchange sends the configured request (with `echo`, if any) and returns the answer's code and Echo value.
func exchange(ctx context.Context, cfg config, conn *client.Conn, echo []byte) (codes.Code, []byte, error) {
	req := conn.AcquireMessage(ctx)
	defer conn.ReleaseMessage(req)
	token, err := message.GetToken()
	if err != nil {
		return 0, nil, err
	}
	req.SetCode(cfg.method)
	req.SetToken(token)
	if err := req.SetPath(cfg.path); err != nil {
		return 0, nil, err
	}
	if cfg.query != "" {
		for _, q := range strings.Split(cfg.query, "&") {
			req.AddQuery(q)
		}
	}
	if cfg.payload != nil {
		req.SetContentFormat(message.TextPlain)
		req.SetBody(bytes.NewReader(cfg.payload))
	}
	if echo != nil {
		req.SetOptionBytes(echoOption, echo)
	}
	if cfg.non {
		req.SetType(message.NonConfirmable)
	} else {
		req.SetType(message.Confirmable)
	}
	resp, err := conn.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer conn.ReleaseMessage(resp)
	value, err := resp.GetOptionBytes(echoOption)
	if err != nil {
		value = nil
	} else {
		value = append([]byte(nil), value...)
	}
	return resp.Code(), value, nil
}

func report(cfg config, tallies []tally) {
	var sum tally
	for _, t := range tallies {
		sum.ok += t.ok
		sum.non2xx += t.non2xx
		sum.timeouts += t.timeouts
		sum.errs += t.errs
		sum.latencies = append(sum.latencies, t.latencies...)
	}
	kind := "CON"
	if cfg.non {
		kind = "NON"
	}
	if cfg.http != "" {
		fmt.Printf("%s: %d clients, HTTP/1.1 %s, %v measured after %v of warm-up\n",
			cfg.http, cfg.clients, cfg.method, cfg.duration, cfg.warmup)
	} else {
		fmt.Printf("coap://%s%s: %d clients, %s %s, %v measured after %v of warm-up\n",
			cfg.host, cfg.path, cfg.clients, kind, cfg.method, cfg.duration, cfg.warmup)
	}
	fmt.Printf("ok: %d\nnon-2.xx: %d\ntimeouts: %d\nerrors: %d\n", sum.ok, sum.non2xx, sum.timeouts, sum.errs)
	lat := sum.latencies
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	max := time.Duration(0)
	if len(lat) > 0 {
		max = lat[len(lat)-1]
	}
	fmt.Printf("latency p50: %v, p90: %v, p99: %v, max: %v\n", q(0.5), q(0.9), q(0.99), max)
	fmt.Printf("req/s: %.1f\n", float64(sum.ok)/cfg.duration.Seconds())
}
