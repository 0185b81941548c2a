package bench_test

import (
	"os"
	"strings"

	"github.com/seqbus/seqbus/bench"
)

// The first line of the table is right-aligned too; the example's
// comparison trims its leading spaces.
func ExampleCompare() {
	floor, _ := bench.ReadHGRM(strings.NewReader(`       Value     Percentile TotalCount 1/(1-Percentile)

       7.000 0.000000000000          1           1.00
       7.200 0.500000000000      50000           2.00
       7.800 0.900000000000      90000          10.00
      14.000 0.990625000000      99063         106.67
      52.000 0.999023437500      99903        1024.00
     268.000 0.999902343750      99991       10240.00
     412.000 1.000000000000     100000
#[Mean    =        7.664, StdDeviation   =        4.218]
#[Max     =      412.000, Total count    =       100000]
#[Buckets =           32, SubBuckets     =         2048]
`))
	gated := floor.Scaled(2.5)
	table, _ := bench.Compare([]bench.Named{{Name: "floor", Dist: floor}, {Name: "gated", Dist: gated}})
	table.WriteText(os.Stdout)
	// Output:
	// percentile  floor µs  gated µs  gated ×
	//          p50      7.20      18.0    2.50×
	//          p90      7.80      19.5    2.50×
	//          p99      14.0      35.0    2.50×
	//        p99.9      52.0       130    2.50×
	//       p99.99       268       670    2.50×
	//          max       412      1030    2.50×
	//        count    100000    100000
}
