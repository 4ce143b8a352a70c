package slackfake

// selectMessages copies the channel messages (or the ephemeral ones) that
// keep accepts, in post order.
func (s *Server) selectMessages(ephemeral bool, keep func(*Message) bool) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.messages
	if ephemeral {
		list = s.ephemeral
	}
	var out []Message
	for _, m := range list {
		if keep(m) {
			out = append(out, m.clone())
		}
	}
	return out
}

// Messages returns the messages in a channel (including the bot's DMs, D…),
// in post order, deleted ones included with Deleted set. Thread replies are
// included; see Thread. channel is an ID or a channel's name ("#gpu-nlp" or
// "gpu-nlp"); messages are kept under the ID, as Slack does.
func (s *Server) Messages(channel string) []Message {
	channel = s.ChannelID(channel)
	return s.selectMessages(false, func(m *Message) bool { return m.Channel == channel })
}

// Thread returns the message ts in channel (an ID or a name) followed by
// its replies, in post order; nil when there is no such message.
func (s *Server) Thread(channel, ts string) []Message {
	channel = s.ChannelID(channel)
	out := s.selectMessages(false, func(m *Message) bool {
		return m.Channel == channel && (m.TS == ts && m.ThreadTS == "" || m.ThreadTS == ts)
	})
	if len(out) == 0 || out[0].TS != ts {
		return nil
	}
	return out
}

// Ephemerals returns the ephemeral messages shown to a user
// (chat.postEphemeral, ephemeral response_url posts, slash command ack
// payloads), in order, in any channel.
func (s *Server) Ephemerals(user string) []Message {
	return s.selectMessages(true, func(m *Message) bool { return m.User == user })
}

// DMChannel returns the ID of the bot's DM channel with a user, "" if it was
// never opened.
func (s *Server) DMChannel(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dmByUser[user]
}

// DMs returns the messages the bot posted in its DM with a user (opened with
// conversations.open, or posted with the user's ID as the channel).
func (s *Server) DMs(user string) []Message {
	ch := s.DMChannel(user)
	if ch == "" {
		return nil
	}
	return s.Messages(ch)
}
