package localfleet

import (
	"io"
	"net"
	"sync"
)

// forward carries every connection l accepts to a connection dial opens, both ways, until l is
// closed and every connection has ended.
func forward(l net.Listener, dial func() (net.Conn, error)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			up, err := dial()
			if err != nil {
				_ = c.Close()
				return
			}
			splice(c, up)
		})
	}
}

// splice copies a to b and b to a until either side ends, then closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go copyTo(a, b)
	go copyTo(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}
