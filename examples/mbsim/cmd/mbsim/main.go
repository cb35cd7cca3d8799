// Command mbsim runs simulated Modbus TCP devices (package mbsim) until
// SIGTERM or SIGINT: each on its own loopback address, 30 tags of mixed
// types in 54 holding (and input) registers from address 0, new values on
// every read. It prints "device I ADDR" per device, then "ready".
//
//	mbsim -devices 500 [-net 127.1] [-port 5020]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgemux/edgemux/examples/mbsim"
)

func main() {
	devices := flag.Int("devices", 500, "simulated devices")
	network := flag.String("net", "127.1", "first two bytes of the devices' loopback addresses")
	port := flag.Int("port", 0, "every device's port; 0 = a free port each")
	flag.Parse()
	sim, err := mbsim.Start(mbsim.Config{Devices: *devices, Net: *network, Port: *port})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for i, a := range sim.Addrs() {
		fmt.Fprintf(w, "device %d %s\n", i, a)
	}
	fmt.Fprintln(w, "ready")
	w.Flush()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	sim.Close()
}
