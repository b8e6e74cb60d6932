// coap-interop is go-coap's client (plgd-dev/go-coap v3) as the interop test drives it: one request to a
// CoAP server, block-wise as go-coap does it by itself (Block2 for large answers, Block1 for large
// bodies, 1,024-byte blocks), without Echo support (RFC 9175) — the common Echo-less client that corral's
// reflection bound must still serve. The answer's payload goes to stdout, its code to stderr; the exit
// status is 0 for a 2.xx answer, 1 for any other answer and 2 when no answer came.
//
//	go build -o coap-interop . && ./coap-interop -m put -f body.bin coap://[::1]:5683/large-update
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	"github.com/plgd-dev/go-coap/v3/message/pool"
	"github.com/plgd-dev/go-coap/v3/udp"
)

func main() {
	method := flag.String("m", "get", "method: get, put, post or delete")
	non := flag.Bool("non", false, "send the request as a NON message (default: CON)")
	file := flag.String("f", "", "the request body, from this file")
	text := flag.String("e", "", "the request body, this text")
	timeout := flag.Duration("timeout", 20*time.Second, "how long to wait for the whole exchange")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: coap-interop [-m get|put|post|delete] [-non] [-f FILE | -e TEXT] coap://HOST:PORT/PATH")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), strings.ToLower(*method), *non, *file, *text, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "coap-interop:", err)
		os.Exit(2)
	}
}

func run(uri, method string, non bool, file, text string, timeout time.Duration) error {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "coap" || u.Host == "" {
		return fmt.Errorf("%q is not a coap://HOST:PORT/PATH URI", uri)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":5683"
	}
	var body []byte
	switch {
	case file != "":
		if body, err = os.ReadFile(file); err != nil {
			return err
		}
	case text != "":
		body = []byte(text)
	}
	code, ok := map[string]codes.Code{"get": codes.GET, "put": codes.PUT, "post": codes.POST, "delete": codes.DELETE}[method]
	if !ok {
		return fmt.Errorf("-m %s: not get, put, post or delete", method)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := udp.Dial(host)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := conn.AcquireMessage(ctx)
	defer conn.ReleaseMessage(req)
	token, err := conn.GetToken()
	if err != nil {
		return err
	}
	req.SetCode(code)
	req.SetToken(token)
	if err = req.SetPath(u.Path); err != nil {
		return err
	}
	for _, q := range strings.Split(u.RawQuery, "&") {
		if q != "" {
			req.AddQuery(q)
		}
	}
	if non {
		req.SetType(message.NonConfirmable)
	} else {
		req.SetType(message.Confirmable)
	}
	if body != nil {
		req.SetContentFormat(message.AppOctets)
		req.SetBody(bytes.NewReader(body))
	}
	resp, err := conn.Do(req)
	if err != nil {
		return err
	}
	return report(resp)
}

// report prints the answer's payload on stdout and its code on stderr, and exits 1 unless it is 2.xx.
func report(resp *pool.Message) error {
	var payload []byte
	if b := resp.Body(); b != nil {
		var err error
		if payload, err = io.ReadAll(b); err != nil {
			return err
		}
	}
	os.Stdout.Write(payload)
	c := resp.Code()
	fmt.Fprintf(os.Stderr, "%d.%02d %v\n", uint8(c)>>5, uint8(c)&0x1f, c)
	if uint8(c)>>5 != 2 {
		os.Exit(1)
	}
	return nil
}
