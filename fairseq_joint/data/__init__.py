"""GILE's data (Pappas & Henderson 2019, Secs. 2-3): the files written by
``fairseq-joint-preprocess-gile`` and their readers (:mod:`.gile_files`), the label sets a split is scored against
(:mod:`.label_set`) and the datasets that batch documents with them (:mod:`.gile_datasets`)."""
