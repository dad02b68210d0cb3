"""What the model is shown of a photo or file, and what is remembered of it afterwards."""

from __future__ import annotations

from pydantic_ai.messages import BinaryContent, ModelRequest, ModelResponse, TextPart, UserPromptPart

from agent.chat.attachments import Attachment, prompt, remembered, split_description, visible, without_files
from agent.history.turn_notes import words

TAGGED = "<attachment_description> A cat\n on a sofa. </attachment_description>\n\nCute!"


def test_the_description_is_split_from_the_answer() -> None:
    assert split_description(TAGGED) == ("A cat on a sofa.", "Cute!")
    assert split_description("No tag here.") == (None, "No tag here.")
    assert remembered("[photo] my cat", "A cat on a sofa.") == "[photo: A cat on a sofa.] my cat"
    assert remembered("[photo] my cat", None) == "[photo] my cat"


def test_a_stream_never_shows_the_description_even_half_written() -> None:
    for cut in range(len(TAGGED)):
        shown = visible(TAGGED[:cut])
        assert "attachment" not in shown and "A cat" not in shown
    assert visible(TAGGED) == "Cute!"
    assert visible("<b>hi") == "<b>hi"  # other text that starts with "<" still streams


def test_files_reach_the_model_and_leave_no_bytes_behind() -> None:
    photo = Attachment("photo", "image/jpeg", b"\xff\xd8jpeg")
    doc = Attachment("document", "text/csv", text="a,b", name="t.csv")
    parts = prompt("[photo] look", [photo, doc])
    assert isinstance(parts[0], str) and parts[0].startswith("[photo] look")
    assert parts[1] == BinaryContent(data=b"\xff\xd8jpeg", media_type="image/jpeg")
    assert parts[2] == '<document name="t.csv">\na,b\n</document>'
    run = [ModelRequest(parts=[UserPromptPart(parts)]), ModelResponse(parts=[TextPart("ok")])]
    kept = without_files(run, "[photo: a cat] look")
    request = kept[0]
    assert isinstance(request, ModelRequest)
    assert [words(p) for p in request.parts if isinstance(p, UserPromptPart)] == ["[photo: a cat] look"]
    assert kept[1] is run[1]
