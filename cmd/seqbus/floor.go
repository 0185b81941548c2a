package main

import "github.com/seqbus/seqbus/bench"

// bench-echo is the hidden hop process of the raw UDP floor
// (bench.RunFloor execs this binary): an echo, or with --relay-to the
// 4-hop middle. It is not in the usage list: users run `seqbus bench floor`.
func init() {
	commands = append(commands, command{name: "bench-echo", run: bench.EchoMain})
}
