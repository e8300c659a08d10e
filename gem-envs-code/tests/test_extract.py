from gem_envs_code.extract import extract_code


def test_last_block_wins() -> None:
    answer = "First:\n```python\nprint(1)\n```\nBetter:\n```py\nprint(2)\n```"
    assert extract_code(answer) == "print(2)"


def test_block_without_language_and_crlf() -> None:
    assert extract_code("```\r\nx = 1\r\n```") == "x = 1"


def test_no_block_is_none() -> None:
    assert extract_code("def f(): return 1") is None
    assert extract_code("```python print(1)```") is None  # no newline after the fence
    assert extract_code("```python\nunterminated") is None


def test_empty_block_is_empty_code() -> None:
    assert extract_code("```python\n```") == ""
