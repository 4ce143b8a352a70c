package commands

// A Reply is what a handler says, independent of any chat platform. Each
// adapter renders it: the console as plain text with numbered buttons,
// Slack as Block Kit. Replies carry plain text only; adapters add styling.
type Reply struct {
	// Text is the headline: one sentence that stands alone (Slack uses it
	// for notifications, the console prints it first).
	Text   string
	Blocks []Block
	// Image, if set, goes with the reply: a chart. Adapters attach it
	// after the message (Slack: uploaded into the same conversation; the
	// console: written to a file whose path it prints) and fall back to
	// its Alt text when they cannot.
	Image *Image
}

// Image is a picture attached to a reply.
type Image struct {
	// Name is a file name, e.g. "gpubot-digest-2026-12-01.png".
	Name string
	// Title is shown with the picture.
	Title string
	// PNG is the picture, PNG-encoded.
	PNG []byte
	// Alt says in words what the picture shows, for whoever cannot see it
	// (and as the text fallback when it cannot be attached).
	Alt string
}

// BlockKind enumerates the kinds of Block.
type BlockKind string

// Block kinds.
const (
	BlockHeader  BlockKind = "header"  // Text: a short title
	BlockSection BlockKind = "section" // Text and/or Fields
	BlockTable   BlockKind = "table"   // Table
	BlockActions BlockKind = "actions" // Buttons
	BlockContext BlockKind = "context" // Text: small print
	BlockCode    BlockKind = "code"    // Text: preformatted, monospace
)

// Block is one part of a Reply.
type Block struct {
	Kind    BlockKind
	Text    string
	Fields  []Field
	Table   *Table
	Buttons []Button
}

// Field is a labelled value shown in a section.
type Field struct {
	Label string
	Value string
}

// Table is a small grid; adapters may page or truncate long ones.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Button is a choice the reader can press.
type Button struct {
	Label  string
	Action Action
	// Style is "", "primary" or "danger".
	Style string
}

// Action is what a button press asks for. It is also what an adapter
// hands back to Service.Handle in Input.Action.
type Action struct {
	// Name is one of the verbs approve, deny, preempt, cancel, release, extend.
	Name    Verb
	Request string
	// Arg is the verb's argument, e.g. "1h" for extend.
	Arg string
}

// DestKind says where an Output goes.
type DestKind string

// Destinations.
const (
	// ToSender: only the person who typed or pressed (Slack: ephemeral).
	ToSender DestKind = "sender"
	// ToChannel: a new card for Request in Channel; later ToThread and
	// UpdateCard outputs for the same request refer to it.
	ToChannel DestKind = "channel"
	// ToThread: a reply in the thread of Request's card.
	ToThread DestKind = "thread"
	// UpdateCard: replace Request's card with this reply.
	UpdateCard DestKind = "card"
	// ToPerson: a direct message to Person.
	ToPerson DestKind = "person"
	// ToPost: a message of its own in Channel, about no request (a
	// scheduled digest or report). It has no thread gpubot follows.
	ToPost DestKind = "post"
)

// Destination addresses an Output.
type Destination struct {
	Kind    DestKind
	Channel string // ToChannel, ToPost (and ToSender: where the sender typed)
	Request string // ToChannel, ToThread, UpdateCard
	Person  string // ToPerson: person name
	ChatID  string // ToPerson: the person's chat user ID, when known
	// User is, for ToSender, the sender's chat user ID; the bot runtime
	// fills it in from the Input.
	User string
}

// Output is one message to deliver.
type Output struct {
	To    Destination
	Reply Reply
	// Seq is the output's place in the outbox when it is kept there
	// until delivered (see Committer); 0 when it is not kept. The bot
	// runtime tells the outbox once it is delivered.
	Seq uint64 `json:",omitempty"`
	// Replayed is set on an output sent again from the outbox after a
	// restart (Runtime.Replay): a Sender that can tell whether the chat
	// already has it does not send it twice.
	Replayed bool `json:"-"`
}

// Input is one thing a person did in a chat: typed a command or pressed a
// button.
type Input struct {
	// User is the chat user ID (Slack "U…") or, in the console, the
	// person's name. The service accepts either.
	User string
	// ReplyTo is the chat user ID that replies to the sender go to when a
	// handler in front of the service changed User (Slack's match by
	// e-mail hands the service the person's name); "" means User.
	ReplyTo string `json:",omitempty"`
	// Channel is where it happened ("" for a direct conversation).
	Channel string
	// ChannelName is the channel's name when the platform gives it
	// (Slack: "gpu-nlp" for channel "C0…"), so that a configured
	// "#gpu-nlp" is recognised.
	ChannelName string
	// Text is the command text, with or without "/gpu".
	Text string
	// Action is set for a button press (Text is then ignored).
	Action *Action
	// Delivery is the key under which the bot runtime keeps the input in
	// its inbox until handled; the service's first commit for the input
	// removes it with what it decided (batch.go). "" for none.
	Delivery string `json:",omitempty"`
	// Unreadable is set when the adapter got something from this person
	// that it could not make sense of (Text and Action are then
	// ignored): the service audits it as invalid and tells the person
	// that it could not understand it.
	Unreadable *Unreadable
}

// Unreadable describes what an adapter could not make sense of.
type Unreadable struct {
	// What it was: "command", "button", "form" or "event".
	What string
	// Why, in a few words for the audit log and the operator, without
	// what the person typed (for example "payload is a string, not an
	// object", "button value has no request").
	Why string
	// Target is the request it named, when that much could be read.
	Target string
}

func header(text string) Block       { return Block{Kind: BlockHeader, Text: text} }
func section(text string) Block      { return Block{Kind: BlockSection, Text: text} }
func contextBlock(text string) Block { return Block{Kind: BlockContext, Text: text} }
func fields(fs ...Field) Block       { return Block{Kind: BlockSection, Fields: fs} }
func code(text string) Block         { return Block{Kind: BlockCode, Text: text} }
func actions(bs ...Button) Block     { return Block{Kind: BlockActions, Buttons: bs} }
func table(cols []string, rows [][]string) Block {
	return Block{Kind: BlockTable, Table: &Table{Columns: cols, Rows: rows}}
}

func private(r Reply) Output { return Output{To: Destination{Kind: ToSender}, Reply: r} }

func plain(text string, more ...Block) Reply { return Reply{Text: text, Blocks: more} }

// replyUser is who replies to the sender go to (see ReplyTo).
func (in Input) replyUser() string { return cmpOr(in.ReplyTo, in.User) }
