"""hsitp.models"""
