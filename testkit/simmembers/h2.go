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

// serveH2Conn serves one client connection of HTTP/2 frames until it ends.
func serveH2Conn(conn net.Conn, m *member, latency time.Duration) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	c := &h2Conn{m: m, latency: latency, bw: bufio.NewWriter(conn), bodies: map[uint32]*pending{}}
	c.fr = http2.NewFramer(c.bw, br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.headers)
	defer func() {
		for _, w := range c.watches {
			m.unwatch(w)
		}
	}()
	c.write(func() error { return c.fr.WriteSettings() })
	for {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := frame.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(c.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.MetaHeadersFrame:
			c.onHeaders(f)
		case *http2.DataFrame:
			c.onData(f)
		case *http2.RSTStreamFrame:
			c.onReset(f.StreamID)
		case *http2.GoAwayFrame:
			return
		}
	}
}

// h2Conn is one client connection of a simulated member.
type h2Conn struct {
	m       *member
	latency time.Duration
	fr      *http2.Framer
	bw      *bufio.Writer
	// mu keeps writes one at a time: they come from the read loop and from the latency timers.
	mu      sync.Mutex
	headers bytes.Buffer
	enc     *hpack.Encoder
	// watches answer with headers, then a DATA frame per event until the client resets the
	// stream or the connection ends. Only the read loop touches them, and bodies.
	watches []*watcher
	// bodies are the requests with a body (a server-side apply), answered once it has all come.
	bodies map[uint32]*pending
}

// pending is a request whose body is still coming.
type pending struct {
	method, path, auth, accept string
	body                       bytes.Buffer
}

func (c *h2Conn) write(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f() == nil {
		_ = c.bw.Flush()
	}
}

func (c *h2Conn) respond(stream uint32, status int, contentType, body string) {
	c.write(func() error {
		c.headers.Reset()
		_ = c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
		_ = c.enc.WriteField(hpack.HeaderField{Name: "content-type", Value: contentType})
		_ = c.enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: c.headers.Bytes(), EndHeaders: true, EndStream: body == ""}); err != nil || body == "" {
			return err
		}
		return writeData(c.fr, stream, []byte(body), true)
	})
}

// startWatch opens a watch on stream, sends initial, and registers it with register (the fixed
// ConfigMaps' watchers, or the applied store's).
func (c *h2Conn) startWatch(stream uint32, metadata bool, initial []byte, register func(*watcher)) {
	w := &watcher{stream: stream, metadata: metadata}
	w.send = func(event []byte) {
		c.write(func() error { return writeData(c.fr, stream, event, false) })
	}
	c.write(func() error {
		c.headers.Reset()
		_ = c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		_ = c.enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: c.headers.Bytes(), EndHeaders: true}); err != nil || len(initial) == 0 {
			return err
		}
		return writeData(c.fr, stream, initial, false)
	})
	c.watches = append(c.watches, w)
	register(w)
}

// reply answers a request, after the member's latency (but for /debug/).
func (c *h2Conn) reply(stream uint32, method, path, auth, accept string, body []byte) {
	status, contentType, answerBody := c.m.answerBody(method, path, auth, accept, body)
	if c.latency > 0 && !strings.HasPrefix(path, "/debug/") {
		time.AfterFunc(c.latency, func() { c.respond(stream, status, contentType, answerBody) })
	} else {
		c.respond(stream, status, contentType, answerBody)
	}
}

// onHeaders starts a request: a watch at once (a watch's latency is its events'), one with a body
// once the body has come, any other after the latency.
func (c *h2Conn) onHeaders(f *http2.MetaHeadersFrame) {
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
	switch {
	case authorized(auth) && isSelectedWatch(path):
		c.startWatch(stream, false, c.m.applied.initialEvents(path), c.m.applied.watch)
	case !f.StreamEnded():
		c.bodies[stream] = &pending{method: method, path: path, auth: auth, accept: accept}
	case authorized(auth) && isWorkloadWatch(path) && isPodWatch(path):
		c.startWatch(stream, false, nil, c.m.pods.watch) // the Pods ChurnPath makes and deletes
	case authorized(auth) && isWorkloadWatch(path):
		c.startWatch(stream, false, nil, func(*watcher) {}) // open, and never an event
	case c.m.isWatch(path, auth):
		metadata := asMetadata(accept)
		c.startWatch(stream, metadata, c.m.initialEvents(path, metadata), c.m.watch)
	default:
		c.reply(stream, method, path, auth, accept, nil)
	}
}

// onData keeps a request's body until it ends; its bytes are given back to the connection's
// flow-control window, or it would stall after 64 KiB of them (a stream's own window is far
// larger than the small bodies sent here).
func (c *h2Conn) onData(f *http2.DataFrame) {
	if p := c.bodies[f.StreamID]; p != nil {
		p.body.Write(f.Data())
		if f.StreamEnded() {
			delete(c.bodies, f.StreamID)
			c.reply(f.StreamID, p.method, p.path, p.auth, p.accept, p.body.Bytes())
		}
	}
	if n := uint32(len(f.Data())); n > 0 {
		c.write(func() error { return c.fr.WriteWindowUpdate(0, n) })
	}
}

// onReset ends the watch on stream, if there is one.
func (c *h2Conn) onReset(stream uint32) {
	for i, w := range c.watches {
		if w.stream == stream {
			c.m.unwatch(w)
			c.watches = append(c.watches[:i], c.watches[i+1:]...)
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
