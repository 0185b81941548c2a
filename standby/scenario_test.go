package standby

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// TestScenarios runs the etcd-raft style data-driven scenarios in
// testdata/*.txt. Each block is a command, a "----" line and the expected
// output, ended by a blank line. Commands:
//
//	new [max-pending=N] [max-bytes=N] [start=N]  fresh window (default 8, 16, 0)
//	deliver SEQ[:SIZE] ...   one OnMessage per argument, one output line each
//	heartbeat SEQ            ObserveHighest
//	reset SEQ                ResetTo
//	gaps [cap=N]             Gaps into a slice of capacity N (default 16)
//	state                    Applied, Highest, Pending and Stats
//
// Run with -rewrite to regenerate the expected output (then review it).
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenarioFile(t, file) })
	}
}

func runScenarioFile(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := strings.Split(string(data), "\n")
	var h *harness
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		cmdLine := i + 1
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without a ---- line", file, cmdLine)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got, err := runScenarioCommand(&h, line)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", file, cmdLine, line, err)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", line, got)
		if i < len(lines) {
			out.WriteString("\n")
		}
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, cmdLine, line, got, strings.Join(want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runScenarioCommand(hp **harness, line string) (string, error) {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	if cmd == "new" {
		cfg := Config{MaxPending: 8, MaxMessageBytes: 16}
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return "", err
			}
			switch k {
			case "max-pending":
				cfg.MaxPending = int(n)
			case "max-bytes":
				cfg.MaxMessageBytes = int(n)
			case "start":
				cfg.Start = n
			default:
				return "", fmt.Errorf("unknown argument %q", k)
			}
		}
		h, err := newHarness(cfg)
		*hp = h
		if err != nil {
			return "error: " + err.Error(), nil
		}
		return "ok", nil
	}
	h := *hp
	if h == nil {
		return "", fmt.Errorf("no window: start with new")
	}
	arg := func(i int) (uint64, error) {
		if i >= len(args) {
			return 0, fmt.Errorf("missing argument")
		}
		return strconv.ParseUint(args[i], 10, 64)
	}
	switch cmd {
	case "deliver":
		var lines []string
		for _, a := range args {
			s, size, hasSize := strings.Cut(a, ":")
			seq, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return "", err
			}
			payload := payloadFor(seq, h.maxBytes)
			if hasSize {
				n, err := strconv.Atoi(size)
				if err != nil {
					return "", err
				}
				payload = make([]byte, n)
			}
			before := len(h.log)
			gap, hasGap, err := h.deliver(seq, payload)
			lines = append(lines, fmt.Sprintf("%s: %s", a, result(h, before, gap, hasGap, err)))
		}
		return strings.Join(lines, "\n"), nil
	case "heartbeat":
		seq, err := arg(0)
		if err != nil {
			return "", err
		}
		h.w.ObserveHighest(seq)
		return fmt.Sprintf("highest %d", h.w.Highest()), nil
	case "reset":
		seq, err := arg(0)
		if err != nil {
			return "", err
		}
		before := len(h.log)
		gap, hasGap := h.w.ResetTo(seq)
		return result(h, before, gap, hasGap, nil), nil
	case "gaps":
		n := 16
		if len(args) > 0 {
			_, v, _ := strings.Cut(args[0], "=")
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				return "", err
			}
		}
		g := h.w.Gaps(make([]Range, 0, n))
		if len(g) == 0 {
			return "none", nil
		}
		return fmtRanges(g), nil
	case "state":
		s := h.w.Stats()
		return fmt.Sprintf("applied=%d ack=%d highest=%d pending=%d\n"+
			"stats: applied=%d drained=%d duplicates=%d buffered=%d dropped=%d resets=%d",
			h.w.Applied(), h.w.Ack(), h.w.Highest(), h.w.Pending(),
			s.Applied, s.Drained, s.Duplicates, s.Buffered, s.Dropped, s.Resets), nil
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

// result describes one call: what it applied (checking payloads), the gap
// it returned, or its error.
func result(h *harness, before int, gap Range, hasGap bool, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	if applied := h.log[before:]; len(applied) > 0 {
		var seqs []string
		for _, e := range applied {
			mark := ""
			if e.payload != string(payloadFor(e.seq, h.maxBytes)) {
				mark = "(payload " + strconv.Quote(e.payload) + ")"
			}
			seqs = append(seqs, strconv.FormatUint(e.seq, 10)+mark)
		}
		parts = append(parts, "apply "+strings.Join(seqs, " "))
	}
	if hasGap {
		parts = append(parts, fmt.Sprintf("gap %d-%d", gap.From, gap.To))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
