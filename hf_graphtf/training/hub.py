"""Sharing a finished model on the Hub: the repository id, the card's model id, one upload."""

from __future__ import annotations

from pathlib import Path

from ..model_card import HUB_ID_PLACEHOLDER
from ..translation.packages import EXPORT_DIR
from .arguments import TranslationTrainingArguments
from .checkpoints import STAGING_DIR
from .resume import RUN_ATTENTION_FILE
from .run_lock import LOCK_FILE

#: left out of the Hub upload: checkpoints, private files, the pickled training arguments, the run's own
#: bookkeeping (its lock, the attention kernel its later sittings keep), which mean nothing to a user, and
#: exported packages (native code, built for one torch and CPU: `package_store`), which never leave by accident
HUB_IGNORE_PATTERNS = [
    "_*",
    "checkpoint-*",
    f"{STAGING_DIR}/*",
    "runs/*",
    "training_args.bin",
    LOCK_FILE,
    RUN_ATTENTION_FILE,
    f"{EXPORT_DIR}/*",
    "*.pt2",
]


def hub_repo_id(training_args: TranslationTrainingArguments) -> str:
    """The Hub repository named like the Trainer names it: ``hub_model_id`` or the output folder's name."""
    return training_args.hub_model_id or Path(training_args.output_dir).absolute().name


def card_model_id(training_args: TranslationTrainingArguments) -> str:
    """The id the card's usage code shows for a model not pushed: ``hub_model_id`` when it names a user,
    else a placeholder user and the folder's name."""
    repo = hub_repo_id(training_args)
    return repo if "/" in repo else f"{HUB_ID_PLACEHOLDER}/{repo}"


def create_hub_repo(training_args: TranslationTrainingArguments) -> str:
    """Create (or find) the Hub repository before the card is written, which needs its full id."""
    from huggingface_hub import HfApi

    api = HfApi(token=training_args.hub_token)
    return api.create_repo(hub_repo_id(training_args), private=training_args.hub_private_repo, exist_ok=True).repo_id


def upload_to_hub(output_dir: str, training_args: TranslationTrainingArguments, repo_id: str) -> None:
    """Upload the finished model folder (no checkpoints) in one commit.

    `Trainer.push_to_hub` would replace the model card with its generic one, so the upload goes
    through `huggingface_hub` directly, with the Trainer's own ignore rules.
    """
    from huggingface_hub import HfApi

    HfApi(token=training_args.hub_token).upload_folder(
        repo_id=repo_id,
        folder_path=output_dir,
        commit_message="Upload translation model trained with hf_graphtf",
        ignore_patterns=HUB_IGNORE_PATTERNS,
        revision=training_args.hub_revision,
    )
