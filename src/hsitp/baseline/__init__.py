"""The classical baseline (``hsitp baseline``): RBF SVM and random forest on the models' own partition (``classical``)."""
