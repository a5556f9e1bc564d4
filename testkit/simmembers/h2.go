package simmembers

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// serveH2 serves one simulated member's connections with just enough HTTP/2 to answer GETs:
// settings, pings, and a HEADERS then DATA answer per request after the latency. net/http's
// server spends about 100µs of CPU per request (a goroutine, a response writer and a flush per
// stream); at 1000 members that is a tenth of a second of the very cores the client under test
// runs on, which a real member's own machine would spend. This costs a fraction of that, so the
// benchmarks measure the client.
func serveH2(ln net.Listener, config *tls.Config, m *member, latency time.Duration) {
	config = config.Clone()
	config.NextProtos = []string{http2.NextProtoTLS}
	tl := tls.NewListener(ln, config)
	for {
		conn, err := tl.Accept()
		if err != nil {
			return
		}
		go serveH2Conn(conn, m, latency)
	}
}

func serveH2Conn(conn net.Conn, m *member, latency time.Duration) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	bw := bufio.NewWriter(conn)
	fr := http2.NewFramer(bw, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)

	// Writes come from the read loop and from the latency timers; one at a time.
	var mu sync.Mutex
	var headers bytes.Buffer
	enc := hpack.NewEncoder(&headers)
	write := func(f func() error) {
		mu.Lock()
		defer mu.Unlock()
		if f() == nil {
			_ = bw.Flush()
		}
	}
	respond := func(stream uint32, status int, contentType, body string) {
		write(func() error {
			headers.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: contentType})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: headers.Bytes(), EndHeaders: true, EndStream: body == ""}); err != nil || body == "" {
				return err
			}
			return writeData(fr, stream, []byte(body), true)
		})
	}
	// A watch answers with headers, then a DATA frame per event until the client resets the
	// stream or the connection ends.
	var watches []*watcher
	defer func() {
		for _, w := range watches {
			m.unwatch(w)
		}
	}()
	// startWatch opens a watch on stream, sends initial, and registers it with register (the
	// fixed ConfigMaps' watchers, or the applied store's).
	startWatch := func(stream uint32, metadata bool, initial []byte, register func(*watcher)) {
		w := &watcher{stream: stream, metadata: metadata}
		w.send = func(event []byte) {
			write(func() error { return writeData(fr, stream, event, false) })
		}
		write(func() error {
			headers.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: headers.Bytes(), EndHeaders: true}); err != nil || len(initial) == 0 {
				return err
			}
			return writeData(fr, stream, initial, false)
		})
		watches = append(watches, w)
		register(w)
	}

	// Requests with a body (a server-side apply) are answered once it has all come.
	type pending struct {
		method, path, auth, accept string
		body                       bytes.Buffer
	}
	bodies := map[uint32]*pending{}
	reply := func(stream uint32, method, path, auth, accept string, body []byte) {
		status, contentType, answerBody := m.answerBody(method, path, auth, accept, body)
		if latency > 0 && !strings.HasPrefix(path, "/debug/") {
			time.AfterFunc(latency, func() { respond(stream, status, contentType, answerBody) })
		} else {
			respond(stream, status, contentType, answerBody)
		}
	}

	write(func() error { return fr.WriteSettings() })
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := frame.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				write(fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				write(func() error { return fr.WritePing(true, f.Data) })
			}
		case *http2.MetaHeadersFrame:
			method, path, auth, accept := f.PseudoValue("method"), f.PseudoValue("path"), "", ""
			for _, h := range f.RegularFields() {
				switch h.Name {
				case "authorization":
					auth = h.Value
				case "accept":
					accept = h.Value
				}
			}
			stream := f.StreamID
			if authorized(auth) && isSelectedWatch(path) {
				startWatch(stream, false, m.applied.initialEvents(path), m.applied.watch)
				continue
			}
			if !f.StreamEnded() {
				bodies[stream] = &pending{method: method, path: path, auth: auth, accept: accept}
				continue
			}
			if m.isWatch(path, auth) {
				metadata := asMetadata(accept)
				startWatch(stream, metadata, m.initialEvents(path, metadata), m.watch) // at once: a watch's latency is its events'
				continue
			}
			reply(stream, method, path, auth, accept, nil)
		case *http2.DataFrame:
			// A request's body is kept until it ends; its bytes are given back to the
			// connection's flow-control window, or it would stall after 64 KiB of them (a
			// stream's own window is far larger than the small bodies sent here).
			if p := bodies[f.StreamID]; p != nil {
				p.body.Write(f.Data())
				if f.StreamEnded() {
					delete(bodies, f.StreamID)
					reply(f.StreamID, p.method, p.path, p.auth, p.accept, p.body.Bytes())
				}
			}
			if n := uint32(len(f.Data())); n > 0 {
				write(func() error { return fr.WriteWindowUpdate(0, n) })
			}
		case *http2.RSTStreamFrame:
			for i, w := range watches {
				if w.stream == f.StreamID {
					m.unwatch(w)
					watches = append(watches[:i], watches[i+1:]...)
					break
				}
			}
		case *http2.GoAwayFrame:
			return
		}
	}
}

// maxFrame is HTTP/2's default largest frame, which every client accepts.
const maxFrame = 16384

// writeData writes data in frames of at most maxFrame bytes, the last ending the stream if end.
func writeData(fr *http2.Framer, stream uint32, data []byte, end bool) error {
	for len(data) > maxFrame {
		if err := fr.WriteData(stream, false, data[:maxFrame]); err != nil {
			return err
		}
		data = data[maxFrame:]
	}
	return fr.WriteData(stream, end, data)
}

// watcher is one open watch of a member's ConfigMaps, of whole objects or their metadata.
type watcher struct {
	stream   uint32
	metadata bool
	send     func(event []byte)
}
