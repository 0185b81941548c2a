package engine

// The public books as the market-data stream describes them, for a
// consumer that joins late or fell past a node's ring of recent updates
// (issue 20, item 5): a consumer that starts from this export at MDSeq and
// then applies every MDLevel update after MDSeq holds the same books as
// one that followed the stream from MD seq 1.

// AllInstruments, passed to AppendBook, exports every instrument.
const AllInstruments uint32 = 0xffffffff

// BookLevel is one level of one side of one instrument's book: the last
// MDLevel update for (Instrument, Side, Price) said the level holds Qty
// (always > 0 here: an update with 0 removed the level).
type BookLevel struct {
	Instrument uint32
	Side       Side
	Price      int64
	Qty        uint64
}

// BookExporter is an optional ability of a StateMachine: exporting the
// books at the state's last market-data seq. The bus type-asserts it to
// serve book snapshots to market-data consumers.
type BookExporter interface {
	// MDSeq is the seq of the last market-data update emitted (0: none).
	MDSeq() uint64
	// AppendBook appends the levels of instrument (AllInstruments: every
	// one) to dst, as of MDSeq, and returns it: instruments in increasing
	// order, and within one, bids best (highest) first, then asks best
	// (lowest) first. Equal states export equal levels. An instrument out
	// of range exports nothing. It allocates only if dst is too small.
	AppendBook(dst []BookLevel, instrument uint32) []BookLevel
}

var _ BookExporter = (*Engine)(nil)

// AppendBook implements BookExporter. It walks the levels, not the
// orders: O(levels), one pass over the preallocated lists.
func (e *Engine) AppendBook(dst []BookLevel, instrument uint32) []BookLevel {
	from, to := instrument, instrument+1
	if instrument == AllInstruments {
		from, to = 0, e.cfg.MaxInstruments
	} else if instrument >= e.cfg.MaxInstruments {
		return dst
	}
	for inst := from; inst < to; inst++ {
		for _, side := range [2]Side{Buy, Sell} {
			for li := e.books[inst].best[side-1]; li != nilIndex; li = e.levels[li].worse {
				lv := &e.levels[li]
				dst = append(dst, BookLevel{Instrument: inst, Side: side, Price: lv.price, Qty: lv.total})
			}
		}
	}
	return dst
}
