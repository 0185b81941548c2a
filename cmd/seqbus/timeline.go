package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// printTimeline prints the failover steps a node logged.
func printTimeline(logPath string) {
	f, err := os.Open(logPath)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, key := range []string{"PROMOTED", "first release after promotion", "STEPPING DOWN", "following a new epoch", "lease not held"} {
			if strings.Contains(line, key) {
				fmt.Printf("    %s\n", line)
			}
		}
	}
}
