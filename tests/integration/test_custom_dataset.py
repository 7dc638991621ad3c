"""A ``data.custom_cls`` dataset without what BOTS reads from verl's RLHFDataset is refused with a message, not an
AttributeError: ``dataframe`` (task ids) and ``data_files`` (reference columns)."""

from __future__ import annotations

import datasets
import pytest

from bots_verl.integration.evidence.task_index import dataset_data_files, dataset_task_ids

PATH = ("extra_info", "index")


class ListDataset:
    """A custom dataset holding its rows in a list, as a user's ``data.custom_cls`` might."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]


class FrameDataset(ListDataset):
    """The same, keeping RLHFDataset's attributes."""

    def __init__(self, rows: list[dict], frame_rows: list[dict] | None = None) -> None:
        super().__init__(rows)
        self.dataframe = datasets.Dataset.from_list(rows if frame_rows is None else frame_rows)
        self.data_files = ["/data/train.parquet"]


ROWS = [{"prompt": f"p{i}", "extra_info": {"index": 100 + i}} for i in range(4)]


def test_a_dataset_without_dataframe_is_refused_naming_custom_cls():
    with pytest.raises(ValueError) as refused:
        dataset_task_ids(ListDataset(ROWS), PATH)
    message = str(refused.value)
    assert "ListDataset, data.custom_cls) has no 'dataframe' attribute" in message
    assert "a datasets.Dataset with one row per position and a 'extra_info' column" in message
    with pytest.raises(ValueError, match=r"ListDataset, data.custom_cls\) has no 'data_files' list"):
        dataset_data_files(ListDataset(ROWS))


def test_a_dataframe_of_another_length_or_type_is_refused():
    with pytest.raises(ValueError, match="has 4 rows but a 'dataframe' of 3"):
        dataset_task_ids(FrameDataset(ROWS, ROWS[:3]), PATH)
    odd = FrameDataset(ROWS)
    odd.dataframe = ROWS  # a list, not a datasets.Dataset
    with pytest.raises(ValueError, match="has a 'dataframe' of type list"):
        dataset_task_ids(odd, PATH)


def test_a_dataset_with_rlhf_dataset_attributes_is_read():
    dataset = FrameDataset(ROWS)
    assert dataset_task_ids(dataset, PATH) == [100, 101, 102, 103]
    assert dataset_data_files(dataset) == ["/data/train.parquet"]
