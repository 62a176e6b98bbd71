// Package sdnotify speaks systemd's service notification protocol: a
// datagram of KEY=VALUE lines to the socket named by NOTIFY_SOCKET, which
// tells the service manager the service is ready, reloading or stopping,
// and feeds its watchdog. Outside systemd (no NOTIFY_SOCKET) every call
// does nothing.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The messages of the protocol (sd_notify(3)).
const (
	Ready     = "READY=1"
	Reloading = "RELOADING=1"
	Stopping  = "STOPPING=1"
	Watchdog  = "WATCHDOG=1"
)

// Send sends state (lines such as Ready) to the service manager. It
// reports false with a nil error when there is none to tell.
func Send(state string) (bool, error) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return false, nil
	}
	switch addr[0] {
	case '/', '@': // a path, or an abstract socket
	default:
		return false, fmt.Errorf("sdnotify: NOTIFY_SOCKET=%q is not a unix socket path", addr)
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	return true, nil
}

// ReloadingNow is the RELOADING message with the monotonic time systemd
// asks for with it (Type=notify-reload).
func ReloadingNow() string {
	return Reloading + "\nMONOTONIC_USEC=" + strconv.FormatInt(monotonicUsec(), 10)
}

// WatchdogInterval returns how often the watchdog must be fed (half the
// WatchdogSec systemd set), or 0 when it is off or meant for another
// process (WATCHDOG_PID).
func WatchdogInterval() (time.Duration, error) {
	s := os.Getenv("WATCHDOG_USEC")
	if s == "" {
		return 0, nil
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return 0, fmt.Errorf("sdnotify: WATCHDOG_PID=%q: %w", p, err)
		}
		if pid != os.Getpid() {
			return 0, nil
		}
	}
	us, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || us <= 0 {
		return 0, errors.New("sdnotify: WATCHDOG_USEC=" + strconv.Quote(s) + " is not a positive number of microseconds")
	}
	return time.Duration(us) * time.Microsecond / 2, nil
}
