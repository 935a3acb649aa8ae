package protocol

// Batch carries, relay to master on the relay link's control stream, the
// returns and events of several devices behind the relay (capability 6,
// [CapBatch]): one frame and one read on the master for many small
// messages, instead of one per device stream.
//
// Each item is one device's message exactly as the device sent it: the
// whole frame body (type byte and CBOR) of a Return or an Event, whose
// signed body is MAC-tagged or signed by the device, so the relay can
// batch them but not forge them. The master handles an item as if it had
// arrived on the device's own stream of the link, which Stream names: a
// device that reconnected to the relay has a new stream and a new session
// key, and what its previous connection sent must not be checked against
// the new one. The master acknowledges items on each device's stream, as
// ever; an item it cannot place (no such device behind this relay, a
// session already gone) is left unacknowledged for the relay to send
// again.
type Batch struct {
	Items []BatchItem `cbor:"1,keyasint"`
}

// BatchItem is one device's Return or Event inside a [Batch].
type BatchItem struct {
	ID     string `cbor:"1,keyasint"` // the device's id
	Stream uint64 `cbor:"2,keyasint"` // the device's stream on the relay link (QUIC stream id)
	Frame  []byte `cbor:"3,keyasint"` // the frame body as the device sent it
}

func (*Batch) Type() Type { return TypeBatch }

// validate checks the batch as a whole. The items' frames are decoded by
// the receiver one by one (Decode), so that a bad one ends only its
// device's session, not every device's of the relay.
func (b *Batch) validate() error {
	if len(b.Items) == 0 {
		return Errorf(KindMalformed, "empty batch")
	}
	for i := range b.Items {
		if err := ValidID(b.Items[i].ID); err != nil {
			return Errorf(KindMalformed, "batch item %d: %v", i, err)
		}
	}
	return nil
}

// BatchItemOverhead bounds what one item adds to a Batch frame besides its
// Frame: the item's map, its keys, the longest id, the stream id and the
// byte string's head, with the batch's own map and array heads.
const BatchItemOverhead = 1 + 3 + (3 + MaxIDLen) + 9 + 5 + (1 + 1 + 1 + 5)
