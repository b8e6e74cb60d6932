// dtls-cid-peer is a CoAP-over-DTLS peer that is not corral's own — pion/dtls through go-coap — with the
// Connection ID of RFC 9146, for corral's interop tests (crates/corral/tests/e2e/interop_dtls_cid.rs). PSK
// with TLS_PSK_WITH_AES_128_CCM_8.
//
//	dtls-cid-peer client -addr 127.0.0.1:5684 -path /hello -id alice -psk secretPSK -rebind
//
// GETs the path and prints `port P: PAYLOAD`; with -rebind it then moves the session to a new UDP socket
// (a new source port, as a NAT rebinding would) and GETs again over the same DTLS session, no new
// handshake. The client offers an empty CID: it sends the server's, and wants none back.
//
//	dtls-cid-peer server -addr 127.0.0.1:0 -id alice -psk secretPSK
//
// Prints `listening on ADDR`, then serves GET /hello ("Hello from pion") and gives each session an
// 8-byte CID.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	piondtls "github.com/pion/dtls/v3"
	"github.com/plgd-dev/go-coap/v3/dtls"
	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	"github.com/plgd-dev/go-coap/v3/mux"
	coapnet "github.com/plgd-dev/go-coap/v3/net"
	"github.com/plgd-dev/go-coap/v3/options"
)

func main() {
	if len(os.Args) < 2 {
		fail(2, "usage: dtls-cid-peer client|server [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5684", "the server's address (client) or where to listen (server)")
	path := fs.String("path", "/hello", "the resource to GET (client)")
	id := fs.String("id", "alice", "the PSK identity")
	psk := fs.String("psk", "secretPSK", "the pre-shared key")
	rebind := fs.Bool("rebind", false, "GET again from a new source port on the same session (client)")
	noCID := fs.Bool("no-cid", false, "do not negotiate Connection IDs (for comparison)")
	_ = fs.Parse(os.Args[2:])
	key := []byte(*psk)
	cfg := &piondtls.Config{
		PSK:             func([]byte) ([]byte, error) { return key, nil },
		PSKIdentityHint: []byte(*id),
		CipherSuites:    []piondtls.CipherSuiteID{piondtls.TLS_PSK_WITH_AES_128_CCM_8},
	}
	switch os.Args[1] {
	case "client":
		if !*noCID {
			cfg.ConnectionIDGenerator = piondtls.OnlySendCIDGenerator()
		}
		client(*addr, *path, *rebind, cfg)
	case "server":
		if !*noCID {
			cfg.ConnectionIDGenerator = piondtls.RandomCIDGenerator(8)
		}
		server(*addr, cfg)
	default:
		fail(2, "usage: dtls-cid-peer client|server [flags]")
	}
}

func fail(code int, a ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"dtls-cid-peer:"}, a...)...)
	os.Exit(code)
}

func client(addr, path string, rebind bool, cfg *piondtls.Config) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		fail(2, err)
	}
	conn, err := newMovingConn()
	if err != nil {
		fail(1, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dconn, err := piondtls.Client(conn, raddr, cfg)
	if err != nil {
		fail(1, "handshake:", err)
	}
	if err := dconn.HandshakeContext(ctx); err != nil {
		fail(1, "handshake:", err)
	}
	co := dtls.Client(dconn)
	defer co.Close()
	get := func() {
		res, err := co.Get(ctx, path)
		if err != nil {
			fail(1, "GET from port", conn.port(), err)
		}
		body, _ := io.ReadAll(res.Body())
		fmt.Printf("port %d: %s\n", conn.port(), body)
	}
	get()
	if rebind {
		if err := conn.rebind(); err != nil {
			fail(1, "rebind:", err)
		}
		get()
	}
}

func server(addr string, cfg *piondtls.Config) {
	l, err := coapnet.NewDTLSListener("udp", addr, cfg)
	if err != nil {
		fail(1, err)
	}
	router := mux.NewRouter()
	_ = router.Handle("/hello", mux.HandlerFunc(func(w mux.ResponseWriter, _ *mux.Message) {
		_ = w.SetResponse(codes.Content, message.TextPlain, bytes.NewReader([]byte("Hello from pion")))
	}))
	s := dtls.NewServer(options.WithMux(router))
	fmt.Printf("listening on %s\n", l.Addr())
	if err := s.Serve(l); err != nil {
		fail(1, err)
	}
}

// movingConn is a net.PacketConn whose UDP socket can be replaced by a new one (a new source port)
// while a DTLS session runs over it.
type movingConn struct {
	mu     sync.Mutex
	cur    *net.UDPConn
	closed bool
	rd     time.Time
}

func newMovingConn() (*movingConn, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &movingConn{cur: c}, nil
}

func (m *movingConn) get() *net.UDPConn {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

func (m *movingConn) port() int { return m.get().LocalAddr().(*net.UDPAddr).Port }

func (m *movingConn) rebind() error {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	m.mu.Lock()
	old := m.cur
	m.cur = c
	_ = c.SetReadDeadline(m.rd)
	m.mu.Unlock()
	return old.Close()
}

func (m *movingConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		c := m.get()
		n, a, err := c.ReadFrom(p)
		m.mu.Lock()
		moved := c != m.cur && !m.closed
		m.mu.Unlock()
		if err != nil && moved && errors.Is(err, net.ErrClosed) {
			continue
		}
		return n, a, err
	}
}

func (m *movingConn) WriteTo(p []byte, a net.Addr) (int, error) { return m.get().WriteTo(p, a) }
func (m *movingConn) LocalAddr() net.Addr                       { return m.get().LocalAddr() }
func (m *movingConn) SetDeadline(t time.Time) error {
	_ = m.SetReadDeadline(t)
	return m.get().SetWriteDeadline(t)
}
func (m *movingConn) SetWriteDeadline(t time.Time) error { return m.get().SetWriteDeadline(t) }
func (m *movingConn) SetReadDeadline(t time.Time) error {
	m.mu.Lock()
	m.rd = t
	m.mu.Unlock()
	return m.get().SetReadDeadline(t)
}
func (m *movingConn) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return m.get().Close()
}
