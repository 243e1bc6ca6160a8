"""The wire, without sockets: frames, the record codec and the handshake."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.comm.codec import CodecError, RecordCodec
from aiotimely.comm.framing import ALL, Frame, FrameDecoder, FrameError, Kind, encode_frame
from aiotimely.comm.handshake import Acceptor, Dialer, HandshakeError

kinds = st.sampled_from(list(Kind))
u32 = st.integers(0, 2**32 - 1)
frames = st.builds(Frame, kinds, u32, u32, u32, u32, st.binary(max_size=300))


@settings(max_examples=200)
@given(st.lists(frames, max_size=8), st.lists(st.integers(1, 64), max_size=20))
def test_frames_survive_any_split_of_the_byte_stream(sent, cuts):
    stream = b"".join(encode_frame(f.kind, f.payload, source=f.source, target=f.target, dataflow=f.dataflow,
                                   channel=f.channel) for f in sent)
    decoder = FrameDecoder()
    got, offset = [], 0
    for cut in cuts:
        got += decoder.feed(stream[offset:offset + cut])
        offset += cut
    got += decoder.feed(stream[offset:])
    assert got == sent and decoder.pending() == 0


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_random_bytes_give_frames_or_a_frame_error_never_anything_else(data):
    decoder = FrameDecoder(max_frame=1 << 16)
    try:
        for frame in decoder.feed(data):
            assert isinstance(frame.kind, Kind)
    except FrameError:
        pass


def test_frame_errors_say_what_is_wrong():
    with pytest.raises(FrameError, match="length"):
        FrameDecoder(max_frame=100).feed(b"\xff" * 30)
    with pytest.raises(FrameError, match="unknown frame kind 99"):
        FrameDecoder().feed(b"\x00\x00\x00\x11" + bytes([99]) + b"\x00" * 16)


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=20), st.binary(max_size=20))
records = st.recursive(scalars, lambda inner: st.one_of(
    st.tuples(inner, inner), st.lists(inner, max_size=4).map(tuple),
    st.frozensets(st.integers(), max_size=4), st.builds(at.Product, inner, inner),
    st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=12)


@settings(max_examples=300, suppress_health_check=[])
@given(st.lists(records, max_size=6))
def test_record_batches_round_trip(batch):
    codec = RecordCodec()
    assert list(codec.unpack(codec.pack(batch))) == batch


class Celsius:
    def __init__(self, degrees: float) -> None:
        self.degrees = degrees


at.register_type(Celsius, lambda c: (c.degrees,), lambda t: Celsius(*t))


class Secretive:
    pass


def test_registered_types_and_pickle_only_when_allowed():
    codec = RecordCodec()
    (point,) = codec.unpack(codec.pack([Celsius(21.5)]))
    assert type(point) is Celsius and point.degrees == 21.5
    with pytest.raises(CodecError, match="register it with aiotimely.register_type.*pickle=True"):
        codec.pack([Secretive()])
    trusting = RecordCodec(allow_pickle=True)
    assert type(trusting.unpack(trusting.pack([Secretive()]))[0]) is Secretive
    with pytest.raises(CodecError, match="does not allow pickle"):
        codec.unpack(trusting.pack([Secretive()]))
    assert codec.unpack(codec.pack([[1, 2], {3}])) == ((1, 2), {3})   # lists arrive as tuples


@given(st.lists(records, max_size=6))
def test_record_batches_round_trip_whichever_way_they_travel(batch):
    codec = RecordCodec()
    assert list(codec.unpack(codec.pack_records(batch))) == batch


def test_plain_record_batches_travel_as_marshal_and_arrive_as_they_were():
    codec = RecordCodec()
    plain = [[1, 2], (3, [4]), {5: [6]}, {7}, frozenset({8}), 2**80, 1.5 + 2j, None, True, b"x", "é"]
    packed = codec.pack_records(plain)
    assert packed[:1] == b"\xc1"
    assert codec.unpack(packed) == plain and type(codec.unpack(packed)) is list


def test_a_batch_with_anything_not_plain_travels_as_msgpack():
    codec = RecordCodec()
    packed = codec.pack_records([[1, 2], Celsius(3.0)])
    assert packed[:1] != b"\xc1"
    lst, celsius = codec.unpack(packed)
    assert lst == (1, 2) and type(celsius) is Celsius      # msgpack's rules: lists arrive as tuples
    product = at.Product(1, 2)
    assert codec.unpack(codec.pack_records([product]))[0] == product


def test_marshal_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("AIOTIMELY_MARSHAL", "0")
    codec = RecordCodec()
    assert codec.pack_records([(1, "a")])[:1] != b"\xc1"
    assert codec.unpack(codec.pack_records([(1, "a")])) == ((1, "a"),)


@settings(max_examples=25, deadline=None)   # a garbled list length makes marshal allocate (slowly) before it fails
@given(st.binary(max_size=100))
def test_decoding_random_marshal_bytes_raises_codec_errors_only(data):
    try:
        RecordCodec().unpack(b"\xc1" + data)
    except CodecError:
        pass


@settings(max_examples=200)
@given(st.binary(max_size=100))
def test_decoding_random_record_bytes_raises_codec_errors_only(data):
    try:
        RecordCodec().unpack(data)
    except CodecError:
        pass


def shake(dialer: Dialer, acceptor: Acceptor) -> None:
    decoder = FrameDecoder()
    to_acceptor = dialer.start()
    while True:
        (frame,) = decoder.feed(to_acceptor)
        to_dialer = acceptor.receive(frame)
        (frame,) = decoder.feed(to_dialer)
        to_acceptor = dialer.receive(frame)
        if to_acceptor is None:
            return


def test_handshake_succeeds_with_the_same_secret_and_names_the_peer():
    dialer, acceptor = Dialer(b"k", 3, 2, expect=0), Acceptor(b"k", 3, 0, allowed=lambda i: i > 0)
    shake(dialer, acceptor)
    assert dialer.done and acceptor.done and acceptor.peer == 2


@pytest.mark.parametrize("dialer, acceptor, complaint", [
    (Dialer(b"a", 2, 1, expect=0), Acceptor(b"b", 2, 0, allowed=lambda i: True), "does not know the shared secret"),
    (Dialer(b"k", 3, 1, expect=0), Acceptor(b"k", 2, 0, allowed=lambda i: True), "believes the cluster has 3"),
    (Dialer(b"k", 2, 1, expect=0), Acceptor(b"k", 2, 0, allowed=lambda i: False), "not expected to connect"),
    (Dialer(b"k", 3, 2, expect=1), Acceptor(b"k", 3, 0, allowed=lambda i: True), "expected process 1"),
])
def test_handshake_refusals_say_why(dialer, acceptor, complaint):
    with pytest.raises(HandshakeError, match=complaint):
        shake(dialer, acceptor)


def test_a_stranger_cannot_skip_the_challenge():
    acceptor = Acceptor(b"k", 2, 0, allowed=lambda i: True)
    with pytest.raises(HandshakeError, match="expected HELLO, got a DATA"):
        acceptor.receive(Frame(Kind.DATA, 0, ALL, 0, 0, b""))
