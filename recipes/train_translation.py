"""Train, evaluate and save a translation model from one recipe.

    python recipes/train_translation.py recipes/configs/bible_es_en_10k_al_both.yaml
    python recipes/train_translation.py recipes/configs/bible_es_en_10k_al_both.yaml --max_steps 20
    accelerate launch --num_processes 2 --cpu recipes/train_translation.py recipes/quickstart.yaml

The recipe YAML holds fields of `ModelArguments`, `DataArguments` and `Seq2SeqTrainingArguments`
(see `hf_graphtf.training.arguments`); flags after it override the file. Run again with the same
``output_dir`` to resume from its last checkpoint. Same as ``hf-graphtf train``.
"""

from hf_graphtf.training import main

if __name__ == "__main__":
    main()
