module corral/tools/coap-interop

go 1.22

require github.com/plgd-dev/go-coap/v3 v3.4.0

require (
	github.com/dsnet/golib/memfile v1.0.0 // indirect
	github.com/pion/dtls/v3 v3.0.6 // indirect
	github.com/pion/logging v0.2.3 // indirect
	github.com/pion/transport/v3 v3.0.7 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/crypto v0.33.0 // indirect
	golang.org/x/exp v0.0.0-20240904232852-e7e105dedf7e // indirect
	golang.org/x/net v0.35.0 // indirect
	golang.org/x/sync v0.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
